"""Tasks: the work of one input partition, as in Kafka Streams' StreamTask.

A `RepartitionTask` re-keys one partition of a stream into the computation's `.by-key` topic
with the consumer-chosen key; a `KeyedTask` owns one partition of the computation's key space —
its RocksDB store, changelog and timer journal partition — and runs the user's hooks through
the shared `Executor`. Everything bad a record can carry (undecodable key, value or headers, a
key extractor that fails, productions the broker would refuse) ends at the error policy with
its stage; the rest of the partition flows (invariant 7).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Message

from framework.core.api import MIN_TIME, Timer
from framework.core.dedup import Segment
from framework.core.executor import Executor
from framework.core.future_records import future_error
from framework.core.metrics import FUTURE_RECORDS
from framework.core.percentile import RecentRate, Unit, Weighted, percentile_watermark
from framework.core.pipeline import Input
from framework.core.timers import encode_timer, timer_key
from framework.core.watermarks import (
    Mark,
    Published,
    combine,
    partition_watermark,
    repartition_producer,
    task_producer,
)
from framework.errors import BadRecord, Retry, TimedOut
from framework.kafka.output import PartIO
from framework.kafka.rekeying import rekey
from framework.kafka.replays import ReplayedRecords, ReplayWatermark
from framework.kafka.stream_codecs import stream_decoder
from framework.state.store import TaskStore
from framework.streaming.calls import Calls
from framework.streaming.hung_calls import HungCalls
from framework.streaming.input_partition import (
    InputPartition,
    ReplayPartition,
    undecodable_replay,
)


class Task:
    producer: str
    inputs: list[InputPartition]
    outputs: set[str]

    def __init__(self, io: PartIO, calls: Calls | None = None) -> None:
        self.io = io
        self.published = MIN_TIME
        self.calls = Calls() if calls is None else calls  # what the watchdog reads

    def handle(self, msg: Message, inp: InputPartition, filed: int | None = None) -> None:
        """Handle one record, at its timestamp or at `filed` (one from the future)."""
        raise NotImplementedError

    def partitions(self) -> list[InputPartition]:
        """Every partition the task reads: its inputs, whose watermarks make its own, and
        any it reads beside them."""
        return self.inputs

    def handle_run(self, msgs: list[Message], inp: InputPartition) -> None:
        """`handle` each of a run of records of one input partition, in offset order. A
        `Retry` raised here leaves `inp.position` at the first record not handled."""
        far, _, limit = inp.future(msgs)
        calls = self.calls
        try:
            for msg in msgs:
                calls.calling = msg
                if far and msg.offset() in far:
                    if self.from_future(msg, inp):
                        inp.consumed(msg)
                    else:
                        self.handle(msg, inp, limit)
                else:
                    self.handle(msg, inp)
        finally:
            calls.calling = None

    def from_future(self, msg: Message, inp: InputPartition) -> bool:
        """Count a record stamped beyond its source's skew allowance; True if it is not to be
        processed: under `on_future="dead_letter"` it is dead-lettered instead (else it is
        processed, filed under the allowance's limit; it moves no watermark)."""
        FUTURE_RECORDS.labels(self.io.spec.name, inp.stream).inc()
        policy = self.io.pipeline.sources[inp.stream].watermark
        if policy.on_future != "dead_letter":
            return False
        self.io.output.dead_letter(None, future_error(policy, msg.timestamp()[1]), "future", msg)
        return True

    def tick(self) -> int:
        """Bring the input watermark up to date and fire what is due; returns firings."""
        return 0

    def input_watermark(self) -> tuple[int | None, bool]:
        for inp in self.inputs:
            inp.watermark.advance(inp.position)
        return combine(inp.frozen or inp.watermark.value() for inp in self.inputs)

    def low_watermark(self) -> tuple[int, bool]:
        raise NotImplementedError

    def mark_state(self) -> tuple[int, bool, int, int, int]:
        """What a mark published now would say (`Mark.state`): watermark, idle, input
        watermark, how far it has read, records late only by the percentile watermark."""
        watermark, idle = self.low_watermark()
        return max(self.published, watermark), idle, self.observed(), self.weight(), self.late()

    def mark(self) -> Mark:
        """The mark to publish on the watermark channel in this commit."""
        watermark, idle, observed, read, late = self.mark_state()
        self.published = watermark
        written = self.io.collector.written
        return Mark.of(
            self.producer,
            watermark,
            idle,
            written,
            self.outputs,
            observed,
            read,
            late,
            self.io.partitions,
        )

    def observed(self) -> int:
        """The input low watermark this task's hooks have seen."""
        return MIN_TIME

    def weight(self) -> int:
        """How far this task has read, for readers that weigh it (`Mark.read`); 0: none do."""
        return 0

    def late(self) -> int:
        """Records taken as late only because of a percentile low watermark."""
        return 0

    def resume(self, previous: Mark | None) -> None:
        """Continue from the last mark a previous owner of this task published."""
        if previous is not None:
            self.published = previous.watermark
            self.io.collector.remember(previous.offsets.items())

    def prepare_commit(self) -> None:
        """Write this task's journal records into the open transaction."""

    def committed(self) -> None:
        """The transaction committed: make local state follow."""

    def close(self) -> None:
        pass


class RepartitionTask(Task):
    """Re-keys one partition of a stream by the consumer's key extractor."""

    def __init__(
        self, io: PartIO, input_: Input, partition: int, calls: Calls | None = None
    ) -> None:
        super().__init__(io, calls)
        spec, stream = io.spec, input_.stream
        self.input = input_
        self.target = spec.by_key(stream)
        self.producer = repartition_producer(spec.name, stream, partition)
        self.outputs = {self.target}
        watermark, channels = partition_watermark(io.pipeline, stream, stream, partition)
        decode = stream_decoder(io.pipeline, stream, io.registry)
        self.inputs = [InputPartition(stream, partition, stream, decode, watermark, channels)]

    def handle(self, msg: Message, inp: InputPartition, filed: int | None = None) -> None:
        # one from the future goes to the `.by-key` topic at the time it is filed under
        collector = self.io.collector
        timestamp = msg.timestamp()[1] if filed is None else filed
        try:
            rekeyed = rekey(
                self.input, self.target, collector.limits, inp.decode, msg.key(), msg.value(),
                timestamp, msg.headers(), inp.id_prefix, msg.offset(),
            )  # fmt: skip
        except BadRecord as error:
            self.io.output.dead_letter(None, error, error.stage, msg)
        else:
            collector.send_all((rekeyed,))
        inp.consumed(msg)

    def low_watermark(self) -> tuple[int, bool]:
        watermark, idle = self.input_watermark()
        return (self.published if watermark is None else watermark), idle

    def weight(self) -> int:
        # the computation's keyed tasks weigh this partition of the stream by its rate
        return self.inputs[0].position if self.io.spec.low_watermark is not None else 0


class KeyedTask(Task):
    """One partition of a computation's key space: state, timers and the user's hooks."""

    def __init__(
        self,
        io: PartIO,
        partition: int,
        store: TaskStore,
        tables: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        calls: Calls | None = None,
        hung: HungCalls | None = None,
    ) -> None:
        """`hung`: the calls the watchdog abandoned (framework/streaming/watchdog.py), whose
        timers are dead-lettered at "timeout" instead of fired."""
        super().__init__(io, calls)
        pipeline, spec = io.pipeline, io.spec
        self.partition = partition
        self.store = store
        self.producer = task_producer(spec.name, partition)
        self.outputs = set(spec.outputs)
        self.inputs = []
        self.percentile = spec.low_watermark
        for i in spec.inputs:
            decode = stream_decoder(pipeline, i.stream, io.registry)
            if i.key is None:
                watermark, channels = partition_watermark(pipeline, i.stream, i.stream, partition)
                topic = i.stream
            else:
                topic = spec.by_key(i.stream)
                producers = [
                    repartition_producer(spec.name, i.stream, r)
                    for r in range(io.partitions[i.stream])
                ]
                watermark = (
                    Published(topic, partition, producers)
                    if self.percentile is None
                    else Weighted(topic, partition, producers, clock)
                )
                channels = [spec.watermarks]
            self.inputs.append(
                InputPartition(topic, partition, i.stream, decode, watermark, channels)
            )
        # read beside its inputs, the dead letters `logwheel dlq replay` sends back: never
        # late, and no part of the input watermark (framework/kafka/replays.py)
        self.replays = ReplayPartition(
            spec.replay, partition, spec.replay, undecodable_replay, ReplayWatermark(), []
        )
        self.replays.replayed = ReplayedRecords(pipeline, spec, io.registry, partition)
        self._rates = [RecentRate(clock) for _ in self.inputs]  # what this task reads
        self._states: list[tuple[bytes, bytes | None]] = []
        self._timers: list[tuple[bytes, bytes | None]] = []
        self._ids: list[Segment] = []
        limit = io.collector.limits.of(spec.changelog).max_bytes
        self.executor = Executor(
            spec,
            store,
            store,
            io.output,
            state_max_bytes=limit,
            tables=tables,
            ids=store,
            calls=self.calls,
            screen_timer=self._screen_timer if hung and hung.timers() else None,
        )
        self.hung = hung
        self._hung_timers = hung.timers() if hung else {}

    def handle(self, msg: Message, inp: InputPartition, filed: int | None = None) -> None:
        self.handle_run([msg], inp)  # it finds a record from the future and its time itself

    def handle_run(self, msgs: list[Message], inp: InputPartition) -> None:
        # the per-record path of a keyed computation: a loop with no call it can do without
        dead_letter, record, process = self.io.output.dead_letter, inp.record, self.executor.process
        if inp is self.replays:  # dead letters sent back: never late (framework/kafka/replays.py)
            process = self.executor.process_replayed
        far, top, limit = inp.future(msgs)
        done, calls = 0, self.calls
        try:
            for done, msg in enumerate(msgs):  # noqa: B007 - read by the Retry clause
                calls.calling = msg
                filed = None
                if far and msg.offset() in far:
                    if self.from_future(msg, inp):
                        continue
                    filed = limit
                try:
                    rec = record(msg, filed)
                except BadRecord as error:
                    dead_letter(None, error, error.stage, msg)
                else:
                    process(rec, msg)
        except Retry:
            # e.g. the registry away, met decoding the record or in its hook (a table's row;
            # the executor undid the hook): the records before it are handled, it is not
            if done:
                inp.consumed_run(msgs[:done])
            raise
        finally:
            calls.calling = None
        inp.consumed_run(msgs, top)

    def partitions(self) -> list[InputPartition]:
        return [*self.inputs, self.replays]

    def _screen_timer(self, key: str, timer: Timer) -> bool:
        """Dead-letter a timer whose hook was abandoned instead of firing it, when it is next
        due — at whatever time: a record re-run from the last commit may set it again at
        another (one timer per key and tag). Forgotten at once, so that no later timer of
        that key and tag is ever taken for it: if this transaction aborts, the timer is
        fired and abandoned once more."""
        reason = self._hung_timers.pop((key, timer.tag, timer.domain), None)
        if reason is None:
            return False
        record = self.executor.timer_record(key, timer)
        self.io.output.dead_letter(record, TimedOut(reason), "timeout")
        assert self.hung is not None
        self.hung.settle_timer(key, timer.tag, timer.domain)
        return True

    def tick(self) -> int:
        strict, _ = self.input_watermark()
        firing = strict if self.percentile is None else self._percentile_watermark()
        executor = self.executor
        if (
            strict is not None
            and firing is not None
            and (firing > executor.input_watermark or strict > executor.strict_watermark)
        ):
            executor.advance_watermark(firing, strict)
        return executor.fire_due()

    def _percentile_watermark(self) -> int | None:
        """The watermark the hooks fire on (core/percentile.py): over the upstream partitions
        of every input — a re-keyed input's source partitions, weighed by their marks, or the
        partition this task reads, weighed by what it read."""
        assert self.percentile is not None
        units: list[Unit] = []
        for inp, rate in zip(self.inputs, self._rates, strict=True):
            rate.add(inp.position)
            if inp.frozen is None and isinstance(inp.watermark, Weighted):
                units += inp.watermark.units()
            else:
                units.append((*(inp.frozen or inp.watermark.value()), rate.rate()))
        return percentile_watermark(units, self.percentile.fraction)[0]

    def observed(self) -> int:
        return self.executor.input_watermark

    def late(self) -> int:
        return self.executor.percentile_late

    def resume(self, previous: Mark | None) -> None:
        super().resume(previous)
        if previous is not None:
            # the hooks' watermark goes on from where they saw it; a percentile one is ahead
            # of the strict one, which is at least what was published (the channels tell more)
            strict = None if self.percentile is None else previous.watermark
            self.executor.advance_watermark(previous.input_watermark, strict)
            self.executor.percentile_late = previous.percentile_late

    def low_watermark(self) -> tuple[int, bool]:
        _, idle = self.input_watermark()
        return (
            self.executor.output_watermark(),
            idle and self.executor.timers.earliest("event") is None,
        )

    # -- commit -------------------------------------------------------------------------------

    def prepare_commit(self) -> None:
        spec, send_all, p = self.io.spec, self.io.collector.send_all, self.partition
        self._states = [(key.encode(), raw) for key, raw in self.executor.state.changes()]
        send_all((spec.changelog, key, value, p, 0, None) for key, value in self._states)
        self._timers = [
            (timer_key(key, tag), encode_timer(key, tag, timer))
            for key, tag, timer in self.executor.timers.changes()
        ]
        send_all((spec.timers, key, value, p, 0, None) for key, value in self._timers)
        if self.executor.ids is not None:
            self._ids = self.executor.ids.changes()
            send_all((spec.ids, s.key, s.value, p, 0, None) for s in self._ids)

    def committed(self) -> None:
        written = self.io.collector.written
        checkpoint = {
            name: written[(topic, self.partition)] + 1
            for name, topic in self.io.spec.journals.items()
            if (topic, self.partition) in written
        }
        self.store.apply(self._states, self._timers, checkpoint, self._ids)
        self.executor.state.committed()
        self.executor.timers.committed()
        if self.executor.ids is not None:
            self.executor.ids.committed()
        self._states, self._timers, self._ids = [], [], []

    def close(self) -> None:
        self.store.close()
