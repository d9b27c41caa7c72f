"""Rebuilding tasks' local stores from their changelog and timer journal (invariant 2), a
batch at a time inside the membership's loop, with the tasks' input partitions paused, so a long
restore never outlives `max.poll.interval.ms` (Kafka Streams' StoreChangelogReader).

The same reader keeps standby replicas (`logwheel run --standby N`, Kafka Streams'
`num.standby.replicas`): stores of partitions this process does not own, followed without end,
so that when it takes one over its restore reads only the tail.

A store whose checkpoint the journals contradict — written for topics since deleted and
created again (`reset --wipe-state`), or beyond their end — is a corrupted task: it is wiped
and restored from the start instead of silently bringing old state back. A timer entry no
task could have written (framework/core/forgery.py) is refused, never restored.

A restore that stands still for `STUCK_S` waits on its client, not on the data (its ends are
where the broker said the journals end, read_committed: the last stable offset, which an
open transaction cannot hold beyond): it is given up (Rejoin) for new clients.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from framework.core.dead_letters import undecodable
from framework.core.dedup import Segment
from framework.core.forgery import checked_timer
from framework.core.metrics import RESTORE_SECONDS, RESTORED_RECORDS
from framework.core.pipeline import ComputationSpec
from framework.errors import ForgedRecord, Rejoin, TaskCorrupted
from framework.kafka.topic_ends import Ends, watermark_offsets
from framework.state.store import TaskStore

log = logging.getLogger(__name__)
_BATCH = 5_000
STUCK_S = 20.0
"""How long a restore may stand still (no record, no end reached, no position moved) before
its clients are given up for a new membership's. A leader that moves after its broker died
holds a restore for the controller's fencing (`broker.session.timeout.ms`, 9 s): 10-12 s
measured on three brokers, with a consumer made before or after a SIGKILL or SIGSTOP of the
leader's broker. A restore once stood at "0 records" for about 2 minutes while a broker of
three was down (issue 24; what its client waited on was not caught), as idle clients met stale
leaders and leader epochs for 30-45 s where new ones read at once (framework.kafka.topic_ends):
whatever a client waits on, this and a rejoin bound the stall."""


@dataclass
class _Progress:
    store: TaskStore
    standby: bool = False  # followed until removed, never done
    started: float = field(default_factory=time.monotonic)
    applied: int = 0


class Restorer:
    """Restores the stores of any number of a process's tasks at once with one consumer."""

    def __init__(
        self,
        consumer: Consumer,
        spec: ComputationSpec,
        topic_ids: dict[str, str],
        refuse: Callable[[Message, ForgedRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.consumer = consumer
        self.refuse = refuse  # where a forged timer entry met restoring a task goes
        self.spec = spec
        self.topic_ids = topic_ids
        self.journals = {topic: name for name, topic in spec.journals.items()}
        self._tasks: dict[int, _Progress] = {}
        self._clock = clock
        self._ends = Ends(consumer, clock)
        self._reported = clock()

    def add(self, partition: int, store: TaskStore, *, standby: bool = False) -> None:
        """Start restoring `store` of task `partition` from its checkpoint (else the start);
        a standby is followed until it is removed."""
        try:
            checkpoint = self._checked(partition, store)
        except TaskCorrupted as why:
            log.warning("%s: %s: wiping the local store and restoring it", self.spec.group, why)
            store.wipe()
            checkpoint = {}
        store.set_topic_ids(self.topic_ids)
        if not standby and not self.restoring():
            self._reported = self._clock()  # a restore is reported once it has lasted 5 s
        journals = [(topic, partition) for topic in self.journals]
        # The task counts once its journals are assigned, so that a failure to learn their
        # ends (a broker gone) leaves nothing for `remove` to unassign.
        try:
            if not standby:
                self._ends.add(
                    journals,
                    {(t, p): checkpoint.get(self.journals[t], 0) for t, p in journals},
                )
            self.consumer.incremental_assign(
                [
                    TopicPartition(t, p, checkpoint.get(self.journals[t], OFFSET_BEGINNING))
                    for t, p in journals
                ]
            )
        except BaseException:
            self._ends.remove(journals)
            raise
        self._tasks[partition] = _Progress(store, standby=standby)

    def _checked(self, partition: int, store: TaskStore) -> dict[str, int]:
        checkpoint = store.checkpoint()
        known = store.topic_ids()
        if known and known != self.topic_ids:
            raise TaskCorrupted(partition, "its journal topics were deleted and created again")
        for topic, name in self.journals.items():
            _, high = watermark_offsets(self.consumer, TopicPartition(topic, partition))
            if checkpoint.get(name, 0) > high:
                raise TaskCorrupted(
                    partition,
                    f"its checkpoint ({name} offset {checkpoint[name]}) lies beyond the end "
                    f"of {topic} ({high})",
                )
        return checkpoint

    def remove(self, partition: int) -> None:
        """Stop restoring task `partition` (its partitions were revoked)."""
        if self._tasks.pop(partition, None) is not None:
            self._unassign(partition)

    def restoring(self) -> bool:
        """Whether a task waits for its restore (standbys do not count)."""
        return any(not t.standby for t in self._tasks.values())

    def busy(self) -> bool:
        return bool(self._tasks)

    def step(self, timeout: float = 0.0) -> list[tuple[int, TaskStore]]:
        """Apply one batch; returns the tasks that are now restored."""
        changes: dict[int, tuple[dict[str, list], dict[str, int]]] = {}
        for msg in self._ends.records(self.consumer.consume(_BATCH, timeout)):
            p = msg.partition()
            if p not in self._tasks:
                continue
            journals, offsets = changes.setdefault(
                p, ({"changelog": [], "timers": [], "ids": []}, {})
            )
            name = self.journals[msg.topic()]
            offsets[name] = msg.offset() + 1
            if name != "timers" or self._genuine(msg, self._tasks[p].standby):
                journals[name].append((msg.key(), msg.value()))
        for p, (journals, offsets) in changes.items():
            task = self._tasks[p]
            ids = [Segment(key, value, 0, []) for key, value in journals["ids"]]
            task.store.apply(journals["changelog"], journals["timers"], offsets, ids)
            task.applied += sum(map(len, journals.values()))
        self._ends.check_positions()
        if self._ends.stalled_for() > STUCK_S:
            raise Rejoin(
                f"the restore of {sorted(self._ends.pending)} has not moved for "
                f"{self._ends.stalled_for():.0f} s: new clients read it again"
            )
        self._report()
        pending = {p for _, p in self._ends.pending}
        done = [(p, t) for p, t in self._tasks.items() if p not in pending and not t.standby]
        for p, task in done:
            del self._tasks[p]
            self._unassign(p)
            seconds = time.monotonic() - task.started
            RESTORED_RECORDS.labels(self.spec.name).inc(task.applied)
            RESTORE_SECONDS.labels(self.spec.name).inc(seconds)
            if task.applied:
                log.info(
                    "%s task %d: restored %d journal records in %.1fs (%.0f records/s)",
                    self.spec.group,
                    p,
                    task.applied,
                    seconds,
                    task.applied / max(seconds, 1e-3),
                )
        return [(p, t.store) for p, t in done]

    def _genuine(self, msg: Message, standby: bool) -> bool:
        """Whether a timer journal record may be applied; a forged one (framework/core/
        forgery.py) is refused: dead-lettered restoring an owned task, counted (as an
        undecodable internal record) following a standby."""
        if msg.value() is None:
            return True
        try:
            checked_timer(msg.key(), msg.value())
        except ForgedRecord as forged:
            undecodable(msg.topic(), forged)
            if self.refuse is not None and not standby:
                self.refuse(msg, forged)
            return False
        return True

    def _report(self) -> None:
        if self._tasks and self._clock() - self._reported > 5:
            self._reported = self._clock()
            for p, task in self._tasks.items():
                if task.standby:
                    continue
                group = self.spec.group
                log.info("%s task %d: restoring, %d records so far", group, p, task.applied)

    def _unassign(self, partition: int) -> None:
        self._ends.remove((topic, partition) for topic in self.journals)
        self.consumer.incremental_unassign(
            [TopicPartition(topic, partition) for topic in self.journals]
        )
