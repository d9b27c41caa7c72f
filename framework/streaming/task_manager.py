"""Assignment, revocation and loss of partitions, and the tasks' lifecycle (Kafka Streams'
TaskManager): created → restoring → running → closed.

The rebalance callbacks only register what changed: an assigned partition starts at its
committed offset and stays paused while its task's store is restored, a batch at a time, in
the membership's loop (`step`); once restored, the task resumes its previous owner's watermark,
claims its outputs' end offsets, and its partitions are resumed.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.timers import decode_timer
from framework.core.watermarks import BoundedLateness, Published
from framework.errors import Rejoin
from framework.kafka.groups import standby_partitions, starts
from framework.kafka.output import PartIO
from framework.query.replicas import Replicas
from framework.state.restore import Restorer
from framework.state.store import TaskStore
from framework.state.tables import Tables
from framework.streaming.calls import Calls
from framework.streaming.channels import WatermarkChannels
from framework.streaming.hung_calls import HungCalls
from framework.streaming.input_partition import InputPartition
from framework.streaming.pacing import unread
from framework.streaming.task import KeyedTask, RepartitionTask, Task

log = logging.getLogger(__name__)
TIMEOUT_S = 30


class TaskManager:
    """The tasks of one group membership and the routes from partitions to them."""

    def __init__(
        self,
        io: PartIO,
        consumer: Consumer,
        admin: AdminClient,
        channels: WatermarkChannels,
        restorer: Restorer,
        state_dir: Path,
        tables: Tables | None = None,
        standby: int = 0,
        calls: Calls | None = None,
        hung: HungCalls | None = None,
        replicas: Replicas | None = None,
    ) -> None:
        self.io = io
        self.spec = io.spec
        self.consumer = consumer
        self.admin = admin
        self.channels = channels
        self.restorer = restorer
        self.state_dir = state_dir
        self.tables = tables
        self.standby = standby
        self.standbys: dict[int, TaskStore] = {}  # followed, not owned
        self.repartitioned = {i.stream: i for i in io.spec.inputs if i.key is not None}
        self.tasks: dict[tuple, Task] = {}  # running
        self.routes: dict[tuple[str, int], tuple[Task, InputPartition]] = {}
        self.waiting: dict[tuple[str, int], int] = {}  # paused partition -> start offset
        self.restoring: dict[int, TaskStore] = {}
        self._fresh: list[Task] = []  # created, not yet resumed from their previous owner
        self.calls = Calls() if calls is None else calls  # what the tasks run, for the watchdog
        self.hung = hung  # hook calls abandoned: their timers are dead-lettered, not fired
        # what queries read (framework/query/replicas.py): forgotten before a store closes
        self.replicas = Replicas() if replicas is None else replicas

    # -- the rebalance callbacks ------------------------------------------------------------

    def assigned(self, tps: list[TopicPartition]) -> None:
        """New partitions: assign them at their committed offsets, paused until their task
        runs (called from the rebalance callback: nothing slow happens here)."""
        starts = self._starts(tps)
        positioned = [TopicPartition(t, p, offset) for (t, p), offset in starts.items()]
        self.consumer.assign(positioned)
        self.consumer.pause(tps)
        self.waiting.update(starts)

    def revoked(self, tps: list[TopicPartition]) -> None:
        """Partitions taken away (after the caller committed, unless they were lost)."""
        self._drop(tps)
        if self.standby:
            self._balance_standbys()
        if tps:
            log.info("%s: gave up %s", self.spec.group, _names(tps))

    def _drop(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.waiting.pop((tp.topic, tp.partition), None)
            task, inp = self.routes.pop((tp.topic, tp.partition), (None, None))
            if inp is not None and isinstance(inp.watermark, Published):
                self.channels.forget(inp.watermark)
            if task is not None and not any(t is task for t, _ in self.routes.values()):
                self.tasks = {k: t for k, t in self.tasks.items() if t is not task}
                if isinstance(task, KeyedTask):
                    self.replicas.forget(task.partition)
                task.close()
                if self.tables is not None and isinstance(task, KeyedTask):
                    self.tables.remove(task.partition)
        for p in [p for p in self.restoring if not self._wanted(p)]:
            self.restorer.remove(p)
            self.restoring.pop(p).close()

    def _starts(self, tps: list[TopicPartition]) -> dict[tuple[str, int], int]:
        return starts(self.consumer, tps, TIMEOUT_S)

    # -- in the loop ------------------------------------------------------------------------

    def step(self) -> None:
        """Start tasks for waiting partitions; restore a batch (and follow the standbys);
        run the restored tasks."""
        self.replicas.beat()  # queries: this loop is alive to see a loss of its partitions
        if not self.waiting and not self.restorer.busy():
            return
        ready: list[tuple[str, int]] = []
        for topic, p in self.waiting:
            if topic in self.repartitioned:
                ready.append((topic, p))
            elif ("k", p) in self.tasks:
                ready.append((topic, p))  # another topic of a running keyed task
            elif p not in self.restoring:
                if p in self.standbys:  # warm: its restore reads only the tail
                    self.restorer.remove(p)
                    self.replicas.forget(p)
                    self.standbys.pop(p).close()
                # Owned before anything that can fail: `close` must find every open store,
                # or the next membership in this process meets RocksDB's lock on it.
                store = self.restoring[p] = TaskStore(self.state_dir / f"task-{p}", decode_timer)
                self.restorer.add(p, store)
        restored = self.restorer.step() if self.restorer.busy() else ()
        if self.standbys:
            self._note_standby_positions()
        for p, store in restored:
            views = self.tables.add(p) if self.tables is not None else None
            task = KeyedTask(self.io, p, store, views, calls=self.calls, hung=self.hung)
            self.tasks[("k", p)] = task
            self.replicas.activate(p, store)
            del self.restoring[p]
            self._fresh.append(task)
            ready += [tp for tp in self.waiting if tp[1] == p and tp[0] not in self.repartitioned]
        if ready:
            self._run(ready)
            if self.standby:
                self._balance_standbys()

    def _balance_standbys(self) -> None:
        """Keep warm replicas of the `standby` partitions after each owned one (mod the
        partition count), so a takeover of a neighbour's partitions restores only the tail."""
        count = self.spec.partitions
        owned = {p for p in range(count) if self._wanted(p) or ("k", p) in self.tasks}
        wanted = standby_partitions(owned, self.standby, count)
        for p in set(self.standbys) - wanted:
            self.restorer.remove(p)
            self.replicas.forget(p)
            self.standbys.pop(p).close()
        for p in sorted(wanted - set(self.standbys)):
            store = self.standbys[p] = TaskStore(self.state_dir / f"task-{p}", decode_timer)
            self.restorer.add(p, store, standby=True)
            self.replicas.follow(p, store)
        if wanted:
            log.info("%s: standby replicas of partitions %s", self.spec.group, sorted(wanted))

    def _note_standby_positions(self) -> None:
        """How far each standby has applied its changelog, for queries that bound the lag:
        the restorer's position, which moves past transaction markers too (its store's
        checkpoint stops at the last record)."""
        changelog = self.spec.changelog
        tps = [TopicPartition(changelog, p) for p in self.standbys]
        for tp in self.restorer.consumer.position(tps):
            if tp.offset >= 0:
                self.replicas.followed(tp.partition, tp.offset)

    def _run(self, ready: list[tuple[str, int]]) -> None:
        self.channels.catch_up()
        for topic, p in ready:
            start = self.waiting.pop((topic, p))
            input_ = self.repartitioned.get(topic)
            ident = ("r", topic, p) if input_ else ("k", p)
            task = self.tasks.get(ident)
            if task is None:
                task = self.tasks[ident] = RepartitionTask(self.io, input_, p, self.calls)
                self._fresh.append(task)
            for inp in task.partitions():
                if (inp.topic, inp.partition) == (topic, p):
                    inp.position = start
                    self.routes[(topic, p)] = (task, inp)
                    if isinstance(inp.watermark, Published):
                        self.channels.listen(inp.channels, inp.watermark)
                    elif isinstance(inp.watermark, BoundedLateness):
                        inp.watermark.unread = partial(unread, self.consumer, inp)
            # anything fetched before the pause was dropped unrouted: read again from start
            try:
                self.consumer.seek(TopicPartition(topic, p, start))
            except KafkaException as error:  # _STATE: the partition went with a fenced member
                raise Rejoin(f"seeking {topic}[{p}] to {start}: {error}") from None
        for task in self._fresh:
            task.resume(self.channels.latest(self.spec.watermarks, task.producer))
            self._claim_outputs(task)
        self._fresh = []
        tps = [TopicPartition(t, p) for t, p in ready]
        self.consumer.resume(tps)
        log.info("%s: assigned %s", self.spec.group, _names(tps))

    def _claim_outputs(self, task: Task) -> None:
        """A task taking over counts everything already in its output partitions as written
        by it, so its first mark cannot overtake what its previous owner wrote after its
        last mark — open transactions' records included: the last stable offset may lie
        below that owner's last writes, held there by another process's transaction."""
        partitions = [(t, p) for t in task.outputs for p in range(self.io.partitions.get(t, 0))]
        self.io.collector.claim_ends(partitions, self.admin, TIMEOUT_S)

    def catch_up_positions(self) -> int:
        """Read positions move past transaction markers too, which no message reports: take
        them from the consumer when idle, or a mark naming a marker's offset (as a takeover's
        claim of its outputs' end offsets does) would never apply. Returns how many moved."""
        tps = [TopicPartition(topic, p) for topic, p in self.routes]
        moved = 0
        for tp in self.consumer.position(tps):
            route = self.routes.get((tp.topic, tp.partition))
            # not past parked records: the consumer's position is, the task's is not
            if route is not None and tp.offset > route[1].position and not route[1].parked:
                route[1].position = tp.offset
                moved += 1
        return moved

    def rewind(self) -> None:
        """A commit was aborted: rebuild every task from its committed state (the local store
        holds exactly what committed) and read again from the committed offsets."""
        tps = [TopicPartition(t, p) for t, p in [*self.routes, *self.waiting]]
        committed = self._starts(tps)
        self._drop(tps)
        self.consumer.pause(tps)
        self.waiting.update(committed)

    def _wanted(self, partition: int) -> bool:
        return any(p == partition for t, p in self.waiting if t not in self.repartitioned)

    def inputs(self) -> list[InputPartition]:
        return [inp for _, inp in self.routes.values()]

    def running(self) -> list[Task]:
        return list(self.tasks.values())

    def close(self) -> None:
        self.replicas.forget_all()
        for p, store in self.standbys.items():
            self.restorer.remove(p)
            store.close()
        self.standbys.clear()
        for task in self.tasks.values():
            task.close()
        if self.tables is not None:
            self.tables.close()
        self.tasks.clear()
        self.routes.clear()
        for p, store in self.restoring.items():
            self.restorer.remove(p)
            store.close()
        self.restoring.clear()


def _names(tps: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in tps)
