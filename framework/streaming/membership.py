"""One membership of a part's consumer group and the loop that runs it (Kafka Streams'
StreamThread.runOnce): poll, hand each run of records to its task, fire timers and commit,
until the process stops or the membership ends. The one loop of every part `logwheel run`
runs: a computation's tasks (framework/streaming/task_manager.py) commit one Kafka transaction
holding productions, journals, marks and input offsets (invariant 1); a sink's
(framework/streaming/sink_task_manager.py) commit by writing each partition's batch into the
sink's target with the partition's next offset.

The rebalance callbacks only register what changed (Kafka Streams' rule: never restore in a
callback); the task manager restores or opens inside the loop. A revocation commits first, a
loss does not — the partitions are someone else's already, and the commit would be fenced.

The clients are made by `framework.streaming.wiring`; a membership runs on whatever it is
handed, so a unit test runs the loop with stand-ins (tests/unit/streaming/fakes.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from framework.core.metrics import REBALANCES
from framework.core.part import own_topic
from framework.errors import ForgedRecord, Rejoin, Retry, TimedOut
from framework.kafka.bounded_calls import LeftBehind, bounded
from framework.kafka.errors import reaching_kafka
from framework.kafka.output import PartIO
from framework.state.restore import Restorer
from framework.state.tables import Tables
from framework.streaming.calls import Calls
from framework.streaming.channels import WatermarkChannels
from framework.streaming.holds import Holds
from framework.streaming.hung_calls import HungCalls
from framework.streaming.input_partition import InputPartition
from framework.streaming.meter import Meter
from framework.streaming.pacing import Pacer
from framework.streaming.refused_records import RefusedRecords
from framework.streaming.task import Task

log = logging.getLogger(__name__)

DEFAULT_COMMIT_INTERVAL_MS = 1000
"""How long a loop working off a backlog goes between commits. A loop whose input is drained
commits at once, so this bounds output latency only under a backlog; each commit costs
a transaction and one changelog record per changed key, so committing ten times a second (Kafka
Streams' 100 ms) rewrote a third of a Zipf-keyed input's keys each time (CountWords: 5% more CPU
per record). Quix Streams commits every 5 s, Faust every 2.8 s. The dirty documents a second
holds (one per record when every record is a new key) stay cached until the commit, beside the
clean ones the cache evicts (framework.core.keyed_state)."""

CLOSE_S = 30.0
"""How long a client's `close` is waited for before it is left behind closing (the group
consumer's waits for the coordinator, librdkafka#3954). A clean leave's last commit, made in
its revocation inside `close`, is bounded on its own and waited for in full."""

IDLE_POLL_MAX_S = 0.25
"""The longest an idle loop sleeps in one poll. Each wake-up costs about 0.2 ms of CPU (the
loop's round: channels, positions, ticks, marks), so 4 a second keep an idle process far under
0.5% of a core, while a mark of another process, or a live source's clock-driven watermark,
waits at most this long to be seen."""


class Tasks(Protocol):
    """What the loop drives: a part's tasks, created, run and closed as partitions come and go
    (`TaskManager` for a computation, `SinkTaskManager` for a sink)."""

    routes: Mapping[tuple[str, int], tuple[Task, InputPartition]]
    restoring: Mapping  # what is restored before it runs (the loop polls without waiting)
    calls: Calls  # what the watchdog reads

    @property
    def waiting(self) -> Collection[tuple[str, int]]: ...  # partitions whose tasks are to start
    def assigned(self, tps: list[TopicPartition]) -> None: ...
    def revoked(self, tps: list[TopicPartition]) -> None: ...
    def step(self) -> None: ...
    def catch_up_positions(self) -> int: ...
    def rewind(self) -> None: ...
    def inputs(self) -> list[InputPartition]: ...
    def running(self) -> list[Task]: ...
    def close(self) -> None: ...


class Commits(Protocol):
    """What commits a part's tasks (`Committer`, `SinkCommitter`)."""

    last_commit: float
    refusal: KafkaError | None  # the broker refused a record's content (the commit aborted)

    def marks_moved(self, tasks: Iterable[Task]) -> bool: ...
    def commit(self, tasks: list[Task], inputs: Iterable[InputPartition]) -> bool: ...
    def abandon(self) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Pace:
    """How often the loop commits and how long it waits for records."""

    commit_interval_s: float = DEFAULT_COMMIT_INTERVAL_MS / 1000
    max_batch: int = 1000  # records one round takes at most
    idle_poll_s: float = 0.02  # an idle round's first wait, doubled each quiet round after


class Membership:
    """One membership of the consumer group: its loop, the flags the loop and the rebalance
    callbacks share, the commit of what its tasks did, and leaving. `channels` and `restorer`
    serve a part that follows watermarks and keeps state (None: one that does neither)."""

    def __init__(
        self,
        io: PartIO,
        *,
        consumer: Consumer,
        committer: Commits,
        tasks: Tasks,
        channels: WatermarkChannels | None,
        restorer: Restorer | None,
        tables: Tables | None,
        refused_records: RefusedRecords,
        holds: Holds,
        meter: Meter,
        pace: Pace = Pace(),  # noqa: B008 - frozen
        hung: HungCalls | None = None,
    ) -> None:
        self._io, self._spec, self._collector = io, io.spec, io.collector
        self._consumer = consumer
        self._committer = committer
        self._tasks = tasks
        self._channels = channels
        self._restorer = restorer
        self._tables = tables
        # the topics a table's partition follows: a keyed task's, and its replayed dead letters
        self._keyed = {*io.spec.keyed_topics, own_topic(io.spec, "replay")}
        self._refused_records = refused_records
        self._holds = holds
        self._pacer = Pacer(consumer, holds)
        self._meter = meter
        self._pace = pace
        self._idle_max_s = max(IDLE_POLL_MAX_S, pace.idle_poll_s)
        self._dirty = False  # something to commit
        self._lost = False
        self._rewind = False  # an aborted commit: re-run from the last committed state
        self._failure: BaseException | None = None  # met in a rebalance callback
        self._callbacks = threading.RLock()  # held by a callback; `_gone`: callbacks do nothing
        self._gone = False
        self._hung = hung  # records and timers whose hook calls were abandoned
        if hung:  # dead-lettered at "timeout" when met, as refused records are
            timed_out = {p: TimedOut(why) for p, why in hung.records().items()}
            self._collector.poisoned.update(timed_out)
        consumer.subscribe(
            list(self._spec.subscribed_topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def run(self, stop: threading.Event) -> None:
        """Run the loop until `stop` is set, then leave the group cleanly: a last commit, and
        what is in flight delivered. Any other end leaves at once, uncommitted, and raises:
        `Rejoin` or `Retry` when a new membership can go on from the last commit (partitions
        lost, a fenced producer, the cluster out of reach)."""
        try:
            with reaching_kafka():
                self._loop(stop)
        except BaseException:
            self._leave(clean=False)
            raise
        self._leave(clean=True)

    def dead_letter_forged(self, msg: Message, forged: ForgedRecord) -> None:
        """A forged mark or timer entry (the channels' and the restorer's refusal): dead-lettered
        in the next commit."""
        self._io.output.dead_letter(None, forged, forged.stage, msg)
        self._dirty = True

    # -- the loop --------------------------------------------------------------------------

    def _loop(self, stop: threading.Event) -> None:
        """Poll, hand records to their tasks, fire timers, commit: until `stop` or the end of
        the membership. Commits as soon as the input is drained (a light input: each commit
        follows the last one at once), else every commit interval (a backlog)."""
        consumer, channels, tasks = self._consumer, self._channels, self._tasks
        committer, refused, holds = self._committer, self._refused_records, self._holds
        pacer = self._pacer
        meter, collector, routes = self._meter, self._collector, tasks.routes
        interval, batch, quiet = self._pace.commit_interval_s, self._pace.max_batch, 0
        calls = tasks.calls
        while not stop.is_set():
            calls.rounds += 1  # the watchdog's sign of progress
            max_batch = 1 if refused.searching else batch
            if self._dirty or tasks.restoring:
                msgs = consumer.consume(max_batch, 0)
            else:  # consume() would sit out its whole timeout; poll() returns at the first
                first = consumer.poll(self._idle_timeout(tasks.running(), quiet))
                msgs = [] if first is None else [first, *consumer.consume(max_batch - 1, 0)]
            self._raise_failure()
            if self._lost:  # in a callback inside that call: nothing more may commit
                raise Rejoin("partitions were lost (session timed out?)")
            heard = channels.poll() if channels is not None else 0
            if self._rewind:  # a commit was aborted, perhaps in a callback inside consume
                self._rewind = False
                tasks.rewind()
                continue
            if self._tables is not None:
                self._sync_tables(msgs)
            if refused.isolating(routes):
                refused.handle(pacer.release(routes) + msgs, routes, holds)
            elif pacer.route(msgs, routes):
                self._dirty = True
            tasks.step()
            holds.step(routes)
            if msgs:
                self._dirty = True
            elif routes:
                heard += tasks.catch_up_positions()
            for task in tasks.running():
                if task.tick():
                    self._dirty = True
            if not self._dirty and committer.marks_moved(tasks.running()):
                # news (a mark heard, a position moved) goes out at once; a mark that moved
                # with the clock alone (a live source's) once a commit interval
                self._dirty = bool(heard) or time.monotonic() - committer.last_commit >= interval
            collector.poll()
            if time.monotonic() - meter.reported >= 1:
                meter.report(tasks.running(), tasks.inputs())
            busy = msgs or heard or self._dirty or tasks.restoring or tasks.waiting or pacer.pending
            quiet = 0 if busy else quiet + 1
            if self._dirty and (
                len(msgs) < max_batch
                or refused.searching
                or time.monotonic() - committer.last_commit >= interval
            ):
                self._commit()

    def _sync_tables(self, msgs: list[Message]) -> None:
        """Tables first: read them at least to where they end now, for the tasks about to
        process records (a record never meets a table older than when it was read)."""
        keyed, routes = self._keyed, self._tasks.routes
        self._tables.sync(
            {
                m.partition()
                for m in msgs
                if m.topic() in keyed and (m.topic(), m.partition()) in routes
            }
        )
        self._tables.step()

    def _idle_timeout(self, running: list[Task], quiet: int) -> float:
        """How long an idle poll may wait: `idle_poll_s`, doubled for each quiet round up to
        `IDLE_POLL_MAX_S`, and never past the next processing-time timer. Records wake the
        poll at once; what else an idle process waits for (watermark marks, a live source's
        watermark, rebalances) is seen within that long."""
        timeout = min(self._pace.idle_poll_s * 2 ** min(quiet, 8), self._idle_max_s)
        now = time.time()
        for task in running:
            nxt = getattr(task, "executor", None) and task.executor.next_processing_timer()
            if nxt is not None:
                timeout = min(timeout, max(0.0, nxt / 1000 - now))
        return timeout

    def _commit(self) -> None:
        """Commit what the tasks did since the last commit; an aborted commit rewinds them."""
        if not self._dirty:
            return
        self._dirty = False
        committed = self._committer.commit(self._tasks.running(), self._tasks.inputs())
        self._refused_records.committed(committed, self._committer.refusal)
        if not committed:
            self._rewind = True
            return
        positions = {(i.topic, i.partition): i.position for i in self._tasks.inputs()}
        self._refused_records.passed(positions)
        if self._hung:  # the records dead-lettered at "timeout" are done with
            self._hung.passed(positions)

    # -- rebalance callbacks: register, never restore --------------------------------------
    # An exception must not leave a callback through the client: confluent-kafka keeps it
    # in C across the call it re-raises from (confluentinc/confluent-kafka-python#729), and
    # measured here it then held a whole ended membership alive (clients, threads, open
    # stores). The callback keeps it; `_raise_failure` raises it after the client returns.

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept() as live:
            if live and tps:
                REBALANCES.labels(self._spec.name, "assigned").inc()
                self._tasks.assigned(tps)

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept() as live:
            if not live:
                return
            if not self._lost:
                self._commit()
            if tps:
                REBALANCES.labels(self._spec.name, "revoked").inc()
            self._tasks.revoked(tps)

    def _on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept() as live:
            if live:
                self._lost = True
                REBALANCES.labels(self._spec.name, "lost").inc()
                self._tasks.revoked(tps)

    @contextmanager
    def _kept(self) -> Iterator[bool]:
        """Around a callback: its error kept, and whether it may act — not once a `close`
        left behind (whose thread may still call it) was given up."""
        with self._callbacks:
            try:
                yield not self._gone
            except BaseException as error:  # noqa: BLE001 - raised again by `_raise_failure`
                self._failure = self._failure or error

    def _raise_failure(self) -> None:
        """Raise what a rebalance callback met during the last client call, if anything."""
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _leave(self, clean: bool) -> None:
        """Leave the group; a clean leave commits first and delivers what is in flight, an
        unclean one aborts and leaves the producer alone: what it holds is either in the
        aborted transaction or produced again after the rejoin, and the delivery reports of
        a fenced producer's flush can fail inside confluent-kafka (SystemError in the
        callback), which ended the process."""
        if not clean:
            self._lost = True  # no commit from the revocation the close triggers
            self._committer.abandon()
        problem = None
        try:
            self._close("the group consumer", self._consumer.close)
            self._raise_failure()
        except (KafkaException, KafkaError, RuntimeError, Rejoin, Retry) as error:
            # Logged once handled: `close` can raise a bare KafkaError (no BaseException),
            # and Python code that raises while CPython handles one reads the exception's
            # fields out of the KafkaError object (logging's level cache raises KeyError).
            problem = str(error)
        finally:  # the stores, whatever happened: the next membership opens them again
            with self._callbacks:  # a callback of a close left behind ends first
                self._gone = True
                self._tasks.close()
        if problem is not None:
            log.warning("%s: closing the consumer: %s", self._spec.group, problem)
        clients = []
        if self._channels is not None:
            clients.append(("the watermark channels", self._channels.close))
        if self._restorer is not None:
            clients.append(("the restorer's consumer", self._restorer.consumer.close))
        for what, close in clients:
            try:
                self._close(what, close)
            except (LeftBehind, KafkaException, RuntimeError) as error:
                log.warning("%s: closing %s: %s", self._spec.group, what, error)
        self._committer.close()
        if clean:
            self._collector.producer.flush(10)

    def _close(self, what: str, close) -> None:
        """`close()`, left behind (`LeftBehind`, logged and counted) past CLOSE_S."""
        bounded(
            close, wait=CLOSE_S, name=f"{self._spec.group}: {what}", computation=self._spec.name
        )
