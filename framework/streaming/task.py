"""Tasks: the work of one input partition, as in Kafka Streams' StreamTask.

A `RepartitionTask` re-keys one partition of a stream into the computation's `.by-key` topic
with the consumer-chosen key; a `KeyedTask` owns one partition of the computation's key space —
its RocksDB store, changelog and timer journal partition — and runs the user's hooks through
the shared `Executor`. Everything bad a record can carry (undecodable key, value or headers, a
key extractor that fails, productions the broker would refuse) ends at the error policy with
its stage; the rest of the partition flows (invariant 7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message

from framework.core.api import MIN_TIME, Record
from framework.core.dedup import Segment
from framework.core.executor import Executor
from framework.core.pipeline import Input
from framework.core.timers import encode_timer, timer_key
from framework.core.watermarks import (
    Mark,
    PartitionWatermark,
    Published,
    combine,
    partition_watermark,
    repartition_producer,
    task_producer,
)
from framework.errors import BadRecord, Retry
from framework.kafka.collector import ID_HEADER
from framework.kafka.output import Runtime, TaskOutput
from framework.kafka.records import decode_record
from framework.kafka.serdes import stream_decoder
from framework.state.store import TaskStore


@dataclass(eq=False)
class InputPartition:
    """One topic-partition a task reads, and what it knows of that partition's watermark."""

    topic: str
    partition: int
    stream: str
    decode: Callable[[bytes], Any]
    watermark: PartitionWatermark
    channels: list[str]
    position: int = 0  # next offset to read
    read: int = 0  # records read, for metrics
    paused: bool = False  # held at `position` until a service answers (streaming/holds.py)
    frozen: tuple[int | None, bool] | None = None  # the watermark while held, else None

    def consumed(self, msg: Message) -> None:
        self.position = msg.offset() + 1
        self.read += 1
        self.watermark.observe(msg.timestamp()[1])

    def consumed_run(self, msgs: list[Message]) -> None:
        """`consumed` for a run of this partition's records, in offset order."""
        self.position = msgs[-1].offset() + 1
        self.read += len(msgs)
        if self._observes:
            self.watermark.observe(max(m.timestamp()[1] for m in msgs))

    def __post_init__(self) -> None:
        self._id_prefix = f"{self.topic}/{self.partition}/"
        # Most watermarks ignore what is read (they follow published marks or nothing).
        self._observes = type(self.watermark).observe is not PartitionWatermark.observe

    def record(self, msg: Message) -> Record:
        """The record `msg` carries; BadRecord (stage "decode") if its key, value or id
        header cannot be read."""
        return decode_record(
            self.decode,
            self.stream,
            msg.key(),
            msg.value(),
            msg.timestamp()[1],
            msg.headers(),
            self._id_prefix,
            msg.offset(),
        )


class Task:
    producer: str
    inputs: list[InputPartition]
    outputs: set[str]

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.published = MIN_TIME

    def handle(self, msg: Message, inp: InputPartition) -> None:
        raise NotImplementedError

    def handle_run(self, msgs: list[Message], inp: InputPartition) -> None:
        """`handle` each of a run of records of one input partition, in offset order. A
        `Retry` raised here leaves `inp.position` at the first record not handled."""
        for msg in msgs:
            self.handle(msg, inp)

    def tick(self) -> int:
        """Bring the input watermark up to date and fire what is due; returns firings."""
        return 0

    def input_watermark(self) -> tuple[int | None, bool]:
        for inp in self.inputs:
            inp.watermark.advance(inp.position)
        return combine(inp.frozen or inp.watermark.value() for inp in self.inputs)

    def low_watermark(self) -> tuple[int, bool]:
        raise NotImplementedError

    def mark_state(self) -> tuple[int, bool, int]:
        """What a mark published now would promise: (watermark, idle, input watermark)."""
        watermark, idle = self.low_watermark()
        return max(self.published, watermark), idle, self.observed()

    def mark(self) -> Mark:
        """The mark to publish on the watermark channel in this commit."""
        self.published, idle, observed = self.mark_state()
        written = self.rt.collector.written
        return Mark.of(self.producer, self.published, idle, written, self.outputs, observed)

    def observed(self) -> int:
        """The input low watermark this task's hooks have seen."""
        return MIN_TIME

    def resume(self, previous: Mark | None) -> None:
        """Continue from the last mark a previous owner of this task published."""
        if previous is not None:
            self.published = previous.watermark
            self.rt.collector.remember(previous.offsets.items())

    def prepare_commit(self) -> None:
        """Write this task's journal records into the open transaction."""

    def committed(self) -> None:
        """The transaction committed: make local state follow."""

    def close(self) -> None:
        pass


class RepartitionTask(Task):
    """Re-keys one partition of a stream by the consumer's key extractor."""

    def __init__(self, runtime: Runtime, input_: Input, partition: int) -> None:
        super().__init__(runtime)
        spec, stream = runtime.spec, input_.stream
        self.input = input_
        self.target = spec.by_key(stream)
        self.producer = repartition_producer(spec.name, stream, partition)
        self.outputs = {self.target}
        watermark, channels = partition_watermark(runtime.pipeline, stream, stream, partition)
        decode = stream_decoder(runtime.pipeline, stream, runtime.registry)
        self.inputs = [InputPartition(stream, partition, stream, decode, watermark, channels)]

    def handle(self, msg: Message, inp: InputPartition) -> None:
        collector = self.rt.collector
        stage = "decode"
        try:
            record = inp.record(msg)
            stage = "key"
            key = self.input.route(record).encode()
            stage = "produce"
            collector.limits.check(self.target, key, msg.value(), record.timestamp)
        except Retry:
            raise
        except Exception as error:
            self.rt.dead_letter(msg, error, getattr(error, "stage", stage))
        else:
            collector.send(
                self.target,
                key,
                msg.value(),
                timestamp=record.timestamp,
                headers=[(ID_HEADER, record.id.encode())],
            )
        inp.consumed(msg)

    def low_watermark(self) -> tuple[int, bool]:
        watermark, idle = self.input_watermark()
        return (self.published if watermark is None else watermark), idle


class KeyedTask(Task):
    """One partition of a computation's key space: state, timers and the user's hooks."""

    def __init__(
        self,
        runtime: Runtime,
        partition: int,
        store: TaskStore,
        tables: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(runtime)
        pipeline, spec = runtime.pipeline, runtime.spec
        self.partition = partition
        self.store = store
        self.producer = task_producer(spec.name, partition)
        self.outputs = set(spec.outputs)
        self.inputs = []
        for i in spec.inputs:
            decode = stream_decoder(pipeline, i.stream, runtime.registry)
            if i.key is None:
                watermark, channels = partition_watermark(pipeline, i.stream, i.stream, partition)
                topic = i.stream
            else:
                topic = spec.by_key(i.stream)
                producers = [
                    repartition_producer(spec.name, i.stream, r)
                    for r in range(runtime.partitions[i.stream])
                ]
                watermark, channels = Published(topic, partition, producers), [spec.watermarks]
            self.inputs.append(
                InputPartition(topic, partition, i.stream, decode, watermark, channels)
            )
        self.output = TaskOutput(runtime)
        self._states: list[tuple[bytes, bytes | None]] = []
        self._timers: list[tuple[bytes, bytes | None]] = []
        self._ids: list[Segment] = []
        limit = runtime.collector.limits.of(spec.changelog).max_bytes
        self.executor = Executor(
            spec, store, store, self.output, state_max_bytes=limit, tables=tables, ids=store
        )

    def handle(self, msg: Message, inp: InputPartition) -> None:
        self.handle_run([msg], inp)

    def handle_run(self, msgs: list[Message], inp: InputPartition) -> None:
        # the per-record path of a keyed computation: a loop with no call it can do without
        output, record, process = self.output, inp.record, self.executor.process
        done = 0
        try:
            for done, msg in enumerate(msgs):  # noqa: B007 - read by the Retry clause
                output.source = msg
                try:
                    rec = record(msg)
                except BadRecord as error:
                    self.rt.dead_letter(msg, error, error.stage)
                else:
                    process(rec)
        except Retry:
            # e.g. the registry away, met decoding the record or in its hook (a table's row;
            # the executor undid the hook): the records before it are handled, it is not
            if done:
                inp.consumed_run(msgs[:done])
            raise
        finally:
            output.source = None
        inp.consumed_run(msgs)

    def tick(self) -> int:
        watermark, _ = self.input_watermark()
        if watermark is not None and watermark > self.executor.input_watermark:
            self.executor.advance_watermark(watermark)
        return self.executor.fire_due()

    def observed(self) -> int:
        return self.executor.input_watermark

    def resume(self, previous: Mark | None) -> None:
        super().resume(previous)
        if previous is not None:
            self.executor.advance_watermark(previous.input_watermark)

    def low_watermark(self) -> tuple[int, bool]:
        _, idle = self.input_watermark()
        return (
            self.executor.output_watermark(),
            idle and self.executor.timers.earliest("event") is None,
        )

    # -- commit -------------------------------------------------------------------------------

    def prepare_commit(self) -> None:
        spec, send, p = self.rt.spec, self.rt.collector.send, self.partition
        self._states = [(key.encode(), raw) for key, raw in self.executor.state.changes()]
        for key, value in self._states:
            send(spec.changelog, key, value, partition=p)
        self._timers = [
            (timer_key(key, tag), encode_timer(key, tag, timer))
            for key, tag, timer in self.executor.timers.changes()
        ]
        for key, value in self._timers:
            send(spec.timers, key, value, partition=p)
        if self.executor.ids is not None:
            self._ids = self.executor.ids.changes()
            for segment in self._ids:
                send(spec.ids, segment.key, segment.value, partition=p)

    def committed(self) -> None:
        written = self.rt.collector.written
        checkpoint = {
            name: written[(topic, self.partition)] + 1
            for name, topic in self.rt.spec.journals.items()
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
