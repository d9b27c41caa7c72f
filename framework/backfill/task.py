"""One Spark task of a backfill: the keys Spark grouped into it, run through the same
`Executor` as the Harness and the Kafka task, written to Kafka in one transaction of its own.

Rows arrive sorted: the committed state and pending timers of the task's keys first, then
their input records in timestamp order. The input watermark follows the data (the latest
timestamp less the inputs' bound, never past the watermark the whole range ends at), so
event-time timers fire where streaming would fire them, and what is still pending at the end
stays pending. Everything keyed lands on the key-space partition the streaming task of that
key writes: the partition it came from when it is read by its Kafka key, else Kafka's murmur2
of the key (invariant 6), as `.by-key` topics are partitioned.

The transaction holds the task's outputs, dead letters, changed state, timer changes and a
completion record; its transactional id is derived from the plan and the task, so a retry of
the task fences its predecessor and aborts what that left open, and a retry of a task whose
transaction committed finds its completion record and skips (exactly once across retries).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient

from framework.backfill.global_tables import read_global_tables
from framework.backfill.plan import done_key
from framework.backfill.stored_plan import read_backfill_topic
from framework.core.api import EVENT, Record
from framework.core.clock import now_ms
from framework.core.dead_letters import ErrorPolicy, reason_class
from framework.core.dedup import MemoryIdBackend, Segment
from framework.core.executor import Executor
from framework.core.future_records import future_error, future_limits, future_policy
from framework.core.keyed_state import MemoryStateBackend
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.core.timers import MemoryTimerBackend, decode_timer, encode_timer, timer_key
from framework.errors import BadRecord
from framework.kafka.collector import Collector
from framework.kafka.config import producer_config
from framework.kafka.limits import DEFAULT_MAX_BYTES, read_limits
from framework.kafka.output import KafkaOutput
from framework.kafka.partitioning import key_partition
from framework.kafka.record_decoding import decode_record as kafka_record
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.rekeying import routed_key
from framework.kafka.stream_codecs import stream_decoder

STATE, TIMER, IDS, RECORD, BAD = 0, 1, 2, 3, 4
"""Kinds of rows a task receives, in the order it sorts them (IDS: one id of a segment of the
id journal, with dedup: the segment's key, its start as ts, the id as value)."""

COLUMNS = ("kind", "key", "ts", "topic", "partition", "offset", "kafka_key", "value", "headers",
           "stream", "keyed", "stage", "error_type", "error")  # fmt: skip
"""A task's row: its kind, the key it is run under, then the Kafka record; for BAD, where and
why it is a dead letter."""

RECORD_CONSTANTS = {"kind": RECORD, "keyed": True, "stage": None, "error_type": None,
                    "error": None}  # fmt: skip
"""The columns that are the same in every row of input read by its Kafka key: a frame of only
such rows leaves them out, and `arrow.task_rows` puts them back (Spark's Arrow writer and the
task's conversion of them had cost about 5% of a backfill's CPU, docs/performance.md)."""

TRANSACTION_TIMEOUT_MS = 600_000
"""A task's transaction lasts as long as the task; the broker's default maximum is 15 min."""
LINGER_MS = 100
"""A task commits once, at its end, so no output waits for the producer's linger, and fuller
batches cost its Python worker less: 11.5 instead of 13.2 s CPU over 1,000,000 CountWords
records in local[2] at streaming's 1 ms (`bench/backfill.py`, one run each; 1,000 ms: 11.3)."""


def route(
    pipeline: Pipeline, registry: RegistrySettings | None, spec: ComputationSpec, topic: str,
    partition: int, offset: int,
    key: bytes | None, value: bytes, timestamp: int, headers: Any,
) -> tuple[str | None, str | None, str | None, str | None]:  # fmt: skip
    """The key its input's extractor gives a record of stream `topic`, or (None, stage, error
    type, message) when it is a dead letter before it reaches a task: the streaming side's
    re-keying rule (`kafka.rekeying`), with no `.by-key` topic to fit."""
    key = None if key is None else bytes(key)  # Spark hands binary columns over as bytearray
    raw = None if value is None else bytes(value)
    inp = next(i for i in spec.inputs if i.stream == topic)
    decode = _decoder(pipeline, registry, topic)
    try:
        _, routed = routed_key(
            inp, decode, key, raw, timestamp, headers, f"{topic}/{partition}/", offset
        )
    except BadRecord as error:
        return None, error.stage, reason_class(error), str(error)
    return routed.decode(), None, None, None


_decoders: dict[tuple[str, str], Any] = {}  # (pipeline, stream): a worker runs many tasks


def decode_record(
    pipeline: Pipeline, registry: RegistrySettings | None, stream: str, key: bytes | None,
    value: bytes, timestamp: int, headers: Any, id_prefix: str, offset: int,
) -> Record:  # fmt: skip
    """The record as the streaming side decodes it (`kafka.record_decoding.decode_record`)."""
    decode = _decoder(pipeline, registry, stream)
    return kafka_record(decode, stream, key, value, timestamp, headers, id_prefix, offset)


def _decoder(pipeline: Pipeline, registry: RegistrySettings | None, stream: str) -> Any:
    """The stream's decoder (`kafka.stream_codecs`, by the stream's format: the wire format's writer
    schemas cached per id), made once per worker process."""
    decode = _decoders.get((pipeline.name, stream))
    if decode is None:
        decode = _decoders[(pipeline.name, stream)] = stream_decoder(pipeline, stream, registry)
    return decode


class Source:
    """An input row as the dead-letter path reads a Kafka message (`kafka.output.Source`):
    made for every row, so cheaper than confluent-kafka's `Message`."""

    __slots__ = ("_key", "_value", "_ts", "_topic", "_partition", "_offset", "_headers")

    def __init__(self, key, value, ts, topic, partition, offset, headers) -> None:  # noqa: ANN001
        self._key, self._value, self._ts = key, value, ts
        self._topic, self._partition, self._offset, self._headers = (
            topic,
            partition,
            offset,
            headers,
        )

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return 1, self._ts

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def headers(self) -> list[tuple[str, bytes | None]]:
        return list(self._headers)


@dataclass(frozen=True)
class TaskSettings:
    """What every task of a plan needs; shipped to the workers with the task function (with
    the Schema Registry the driver resolved: the workers' environment may not name it)."""

    pipeline: Pipeline
    spec: ComputationSpec
    plan_id: str
    bootstrap: str
    kafka: dict
    registry: RegistrySettings | None
    backfill_topic: str
    start_watermark: int
    end_watermark: int | None
    lag: int
    wall: int | None = None  # the plan's wall time, what is from the future is judged by


def run_task(settings: TaskSettings, index: int, rows: Iterator[Any]) -> str:
    """Run Spark task `index` of the plan; returns its completion record (JSON): counts, the
    last offset it wrote per output partition, its pending event-time timers' earliest time
    per key-space partition."""
    began = time.time()
    spec, kafka = settings.spec, settings.kafka
    config = producer_config(
        settings.bootstrap,
        transactional_id=f"{spec.group}.backfill.{settings.plan_id}.{index}",
        extra={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": LINGER_MS, **kafka},
    )
    admin = AdminClient({**kafka, "bootstrap.servers": settings.bootstrap})
    limits = read_limits(
        admin,
        [*spec.outputs, spec.changelog, spec.dlq],
        int(config.get("message.max.bytes", DEFAULT_MAX_BYTES)),
    )
    collector = Collector(config, limits)
    producer = collector.producer
    producer.init_transactions(60)  # fences an earlier attempt, aborts what it left open
    key = done_key(settings.plan_id, index)
    done = read_backfill_topic(settings.bootstrap, settings.backfill_topic, kafka).get(key)
    if done is not None:  # an earlier attempt committed: its outputs are there, once
        return json.dumps(json.loads(done) | {"skipped": True})
    producer.begin_transaction()
    runner = _TaskRun(settings, collector)
    summary = runner.run(rows)
    collector.flush()
    summary["records_out"] = sum(collector.delivered[stream] for stream in spec.outputs)
    summary["written"] = [[t, p, o] for (t, p), o in collector.written.items()]
    summary["began"], summary["ended"] = began, time.time()  # the bench's timeline
    completion = json.dumps(summary).encode()
    producer.produce(settings.backfill_topic, completion, key.encode(), partition=0)
    producer.commit_transaction(120)
    return json.dumps(summary)


class _TaskRun:
    def __init__(self, settings: TaskSettings, collector: Collector):
        self.s = settings
        self.collector = collector
        spec = settings.spec
        self.policy = ErrorPolicy(spec.group, spec.on_error)
        self.output = KafkaOutput(
            settings.pipeline, spec, collector, self.policy, settings.registry
        )
        # the keys' committed state and timers as they stood when the plan was made
        self.state, self.timers = MemoryStateBackend(), MemoryTimerBackend()
        self.ids = MemoryIdBackend()
        self.segment_partition: dict[bytes, int] = {}  # id journal segment -> its partition
        self.partition_of: dict[str, int] = {}
        self.records_in = 0
        self.keys: set[str] = set()
        # sources read as written, held to a skew allowance: topic -> (limit, policy)
        wall = now_ms() if settings.wall is None else settings.wall
        self.tables = read_global_tables(
            settings.pipeline, spec, settings.bootstrap, settings.kafka, settings.registry, wall
        )
        self.future = {
            topic: (limit, future_policy(settings.pipeline, topic))
            for topic, limit in future_limits(
                settings.pipeline, [i.stream for i in spec.inputs], wall
            ).items()
        }

    def run(self, rows: Iterator[Any]) -> dict:
        s, executor, dead_letter = self.s, None, self.output.dead_letter
        end, lag = s.end_watermark, s.lag
        for row in rows:  # a tuple: positions are much cheaper than pyspark Row attributes
            kind, key, ts, topic, partition, offset, kafka_key, value, headers, stream, keyed = row[
                :11
            ]
            if kind == STATE:
                self.state.docs[key] = bytes(value)
                self.partition_of.setdefault(key, partition)
                continue
            if kind == TIMER:
                timer = decode_timer(bytes(value))
                self.timers.timers[(key, timer.tag)] = timer
                self.partition_of.setdefault(key, partition)
                continue
            if kind == IDS:  # this task's ids of a segment, the segment known by its key
                segment = self.ids.segments.setdefault(
                    bytes(kafka_key), Segment(bytes(kafka_key), b"", ts, [])
                )
                segment.ids.append((key, bytes(value).decode()))
                self.ids.held.add((key, bytes(value).decode()))
                self.segment_partition[segment.key] = partition
                self.partition_of.setdefault(key, partition)
                continue
            if executor is None:
                executor = self._executor()
            self.records_in += 1
            kafka_key = None if kafka_key is None else bytes(kafka_key)
            value = None if value is None else bytes(value)
            headers = [(h[0], None if h[1] is None else bytes(h[1])) for h in headers or ()]
            source = Source(kafka_key, value, ts, topic, partition, offset, headers)
            if topic in self.future and (ts := self._filed(ts, topic, source)) is None:
                continue
            if kind == BAD:
                stage, error_type, error = row[11:]
                cause = type(error_type, (Exception,), {})(error)
                dead_letter(None, BadRecord(stage, error, cause), stage, source)
            else:
                try:
                    record = decode_record(
                        s.pipeline, s.registry, stream, kafka_key, value, ts, headers,
                        f"{topic}/{partition}/", offset,
                    )  # fmt: skip
                except BadRecord as error:
                    dead_letter(None, error, error.stage, source)
                else:
                    self._process(executor, record, key, partition, keyed, source)
            if end is not None:
                executor.advance_watermark(min(ts - lag, end))
        if executor is None:
            executor = self._executor()
        if end is not None:
            executor.advance_watermark(end)
        return self._finish(executor)

    def _filed(self, ts: int, topic: str, source: Source) -> int | None:
        """The time a record of a source held to a skew allowance is filed under, as streaming
        files it: its own, or the limit (core/future_records.py); None: dead-lettered."""
        limit, policy = self.future[topic]
        if ts <= limit:
            return ts
        if policy.on_future == "dead_letter":
            self.output.dead_letter(None, future_error(policy, ts), "future", source)
            return None
        return limit

    def _executor(self) -> Executor:
        limit = self.collector.limits.of(self.s.spec.changelog).max_bytes
        executor = Executor(
            self.s.spec, self.state, self.timers, self.output, state_max_bytes=limit, ids=self.ids,
            tables=self.tables,
        )  # fmt: skip
        executor.advance_watermark(self.s.start_watermark)
        return executor

    def _process(
        self, executor: Executor, record: Record, key: str, partition: int, keyed: bool,
        source: Source,
    ) -> None:  # fmt: skip
        """Run the record's hook under its routing key, noting the key's key-space partition:
        where it was read when its Kafka key is the key, else murmur2 of the key."""
        if record.key != key:
            record = Record(key, record.value, record.timestamp, record.stream, record.id)
        if key not in self.partition_of:
            self.partition_of[key] = (
                partition if keyed else key_partition(key, self.s.spec.partitions)
            )
        self.keys.add(key)
        executor.process(record, source)

    def _finish(self, executor: Executor) -> dict:
        spec, send = self.s.spec, self.collector.send
        n = spec.partitions

        def partition(key: str) -> int:
            if key not in self.partition_of:
                self.partition_of[key] = key_partition(key, n)
            return self.partition_of[key]

        for key, raw in executor.state.changes():
            send(spec.changelog, key.encode(), raw, partition=partition(key))
        for key, tag, timer in executor.timers.changes():
            value = encode_timer(key, tag, timer)
            send(spec.timers, timer_key(key, tag), value, partition=partition(key))
        if executor.ids is not None:
            for segment in executor.ids.changes(partition):
                where = self.segment_partition.get(segment.key)
                if where is None:  # a new one: its ids' partition
                    where = partition(segment.ids[0][0])
                send(spec.ids, segment.key, segment.value, partition=where)
        earliest: dict[int, int] = {}
        for key, timer in executor.timers.pending():
            if timer.domain == EVENT:
                p = partition(key)
                earliest[p] = min(earliest.get(p, timer.time), timer.time)
        return {
            "records_in": self.records_in,
            "dead_letters": self.policy.bad_records,
            "late": executor.late_records,
            "keys": len(self.keys),
            "earliest_timers": {str(p): t for p, t in earliest.items()},
        }
