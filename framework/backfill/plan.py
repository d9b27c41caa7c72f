"""The plan of a backfill: what it reads, where it starts and ends, and how it is split, written
down before anything else so that a backfill that dies is finished, not started again.

A plan is resolved once, from where the computation stands: per topic-partition it consumes,
the group's committed offset (else `--from`) to `--until` (fixed when the plan is made), the
`.by-key` topics from the committed offset to their end; its changelog and timer journal (and
id journal, with dedup) up to their current end; the input watermark its tasks last published;
and the input watermark at the end of the range, as the data and the watermark channels say.
It is kept as JSON on the compacted topic `<pipeline>.<computation>.backfill` (key `plan`),
next to one completion record per Spark task that committed (key `done/<plan id>/<task>`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.dead_letters import undecodable
from framework.core.forgery import DEFAULT_ALLOWANCE_MS, check_mark, pipeline_allowance
from framework.core.part import reader_group
from framework.core.pipeline import BoundedOutOfOrderness, ComputationSpec, Pipeline, PipelineError
from framework.core.watermarks import (
    Mark,
    Published,
    decode_mark,
    partition_watermark,
    task_producer,
)
from framework.kafka.config import consumer_config, producer_config
from framework.kafka.topic_ends import Ends, offset_at, parse_point, read_to_end
from framework.kafka.topics import COMPACT, TopicSpec

PLAN_KEY = "plan"


def backfill_topic(spec: ComputationSpec) -> str:
    """Where a computation's backfill plans and task completions live."""
    return f"{spec.group}.backfill"


def backfill_topic_spec(spec: ComputationSpec) -> TopicSpec:
    return TopicSpec(backfill_topic(spec), 1, dict(COMPACT), "backfill", True, (spec.name,))


def done_key(plan_id: str, task: int) -> str:
    return f"done/{plan_id}/{task}"


@dataclass(frozen=True)
class Range:
    """Offsets [start, end) of one topic-partition; `stream` is the input it carries and
    `keyed` says its Kafka key already is the computation's key (a `.by-key` topic, or an
    input read by its Kafka key), so its partition is the key-space partition."""

    topic: str
    partition: int
    start: int
    end: int
    stream: str
    keyed: bool


def co_partitioned(ranges: tuple[Range, ...]) -> int | None:
    """How many Spark tasks read `ranges` without a shuffle: one per topic-partition when every
    non-empty range is of one input read by its Kafka key (its partition is the key-space
    partition, so a key's records are all in one), else None (the records are grouped by key
    in a shuffle)."""
    ranges = tuple(r for r in ranges if r.end > r.start)
    if ranges and all(r.keyed for r in ranges) and len({r.topic for r in ranges}) == 1:
        return len(ranges)
    return None


@dataclass(frozen=True)
class Plan:
    computation: str
    ranges: tuple[Range, ...]
    tasks: int
    changelog_end: dict[int, int]
    timers_end: dict[int, int]
    start_watermarks: dict[int, int]  # key-space partition -> input watermark it had
    end_watermark: int | None  # input watermark once the range is read; None: unknown
    lag: int  # the watermark trails the data by this much (BoundedOutOfOrderness)
    ids_end: dict[int, int] = field(default_factory=dict)  # the id journal's (with dedup)
    created_at: int = field(default_factory=now_ms)
    status: str = "running"

    @property
    def id(self) -> str:
        """Same ranges and split, same id: the transactional ids of its tasks derive from it."""
        what = json.dumps([self.computation, [asdict(r) for r in self.ranges], self.tasks])
        return hashlib.sha256(what.encode()).hexdigest()[:16]

    @property
    def start_watermark(self) -> int:
        """The watermark every task starts from: no record below it is processed on time."""
        return min(self.start_watermarks.values(), default=MIN_TIME)

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["id"] = self.id
        return json.dumps(doc).encode()

    @classmethod
    def from_json(cls, raw: bytes, allowance_ms: int = DEFAULT_ALLOWANCE_MS) -> Plan:
        """The plan `to_json` wrote, every field checked (names, types, ranges; watermarks no
        further ahead of wall time than `allowance_ms`; its id): PlanError otherwise, since
        anyone who can write the backfill topic could have written it."""
        try:
            return _decoded_plan(raw, now_ms() + allowance_ms)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise PlanError(
                f"the stored backfill plan is not one logwheel wrote ({error}): delete the "
                "computation's `.backfill` topic to plan the backfill afresh"
            ) from None

    def records(self) -> int:
        return sum(r.end - r.start for r in self.ranges)

    def most_tasks(self) -> int:
        """The most tasks the plan can give anything to: one per row at most, the rows being
        its records and its journals' (state, timers, ids) up to their ends."""
        journals = (self.changelog_end, self.timers_end, self.ids_end)
        return max(1, self.records() + sum(sum(ends.values()) for ends in journals))


class PlanError(PipelineError):
    """A stored backfill plan that fails its checks; the message names the fix."""


_RANGE_FIELDS = {"topic", "partition", "start", "end", "stream", "keyed"}
_PLAN_FIELDS = {f.name for f in fields(Plan)} | {"id"}
_OPTIONAL_FIELDS = {"id", "ids_end"}  # ids_end: plans written before dedup lack it
_STATUSES = ("running", "done")


def _int(doc: dict, name: str, low: int = MIN_TIME, high: int = 2**63 - 1) -> int:
    value = doc[name]
    if type(value) is not int or not low <= value <= high:
        raise PlanError(f"{name}={value!r} is not a whole number in [{low}, {high}]")
    return value


def _str(doc: dict, name: str) -> str:
    if type(doc[name]) is not str or not doc[name]:
        raise PlanError(f"{name}={doc[name]!r} is not a name")
    return doc[name]


def _exactly(doc: object, names: set[str], what: str) -> dict:
    if not isinstance(doc, dict) or set(doc) - names or (names - _OPTIONAL_FIELDS) - set(doc):
        raise PlanError(f"{what} has not exactly the fields {sorted(names)}")
    return doc


def _per_partition(doc: dict, name: str, low: int, high: int) -> dict[int, int]:
    table = doc[name]
    if not isinstance(table, dict):
        raise PlanError(f"{name} is not a table of partitions")
    out = {}
    for p in table:
        if not p.isdigit():
            raise PlanError(f"{name} names partition {p!r}")
        out[int(p)] = _int(table, p, low, high)
    return out


def _decoded_plan(raw: bytes, latest_time: int) -> Plan:
    doc = _exactly(json.loads(raw), _PLAN_FIELDS, "the plan")
    if not isinstance(doc["ranges"], list):
        raise PlanError("ranges is not a list")
    ranges = []
    for r in doc["ranges"]:
        r = _exactly(r, _RANGE_FIELDS, "a range")
        start = _int(r, "start", 0)
        if type(r["keyed"]) is not bool:
            raise PlanError(f"keyed={r['keyed']!r} is not true or false")
        ranges.append(
            Range(
                _str(r, "topic"),
                _int(r, "partition", 0),
                start,
                _int(r, "end", start),
                _str(r, "stream"),
                r["keyed"],
            )  # fmt: skip
        )
    end = None if doc["end_watermark"] is None else _int(doc, "end_watermark", high=latest_time)
    if doc["status"] not in _STATUSES:
        raise PlanError(f"status={doc['status']!r}")
    plan = Plan(
        computation=_str(doc, "computation"),
        ranges=tuple(ranges),
        tasks=_int(doc, "tasks", 1, 1_000_000),
        changelog_end=_per_partition(doc, "changelog_end", 0, 2**63 - 1),
        timers_end=_per_partition(doc, "timers_end", 0, 2**63 - 1),
        ids_end=_per_partition(doc, "ids_end", 0, 2**63 - 1) if "ids_end" in doc else {},
        start_watermarks=_per_partition(doc, "start_watermarks", MIN_TIME, latest_time),
        end_watermark=end,
        lag=_int(doc, "lag", 0),
        created_at=_int(doc, "created_at", 0, latest_time),
        status=doc["status"],
    )
    if "id" in doc and doc["id"] != plan.id:
        raise PlanError(f"id {doc['id']!r} is not its ranges' ({plan.id})")
    return plan


# -- reading and writing the backfill topic -------------------------------------------------


def read_backfill_topic(bootstrap: str, topic: str, kafka: dict | None = None) -> dict[str, bytes]:
    """The latest value per key of the backfill topic (read_committed), tombstones removed."""
    # the topic is `<group>.backfill` (backfill_topic): read as the group's readers are
    return read_compacted(bootstrap, topic, reader_group(topic.removesuffix(".backfill")), kafka)


def read_compacted(
    bootstrap: str, topic: str, reader: str, kafka: dict | None = None
) -> dict[str, bytes]:
    """Latest value per key of partition 0 of a compacted topic, up to its current end;
    `reader` is the consumer's group id (`kafka.reader_group`)."""
    consumer = Consumer(consumer_config(bootstrap, reader=reader, extra=kafka))
    latest: dict[str, bytes] = {}

    def apply(msgs: list) -> None:
        for msg in msgs:
            key = msg.key().decode() if msg.key() else ""
            if msg.value() is None:
                latest.pop(key, None)
            else:
                latest[key] = msg.value()

    try:
        ends = Ends(consumer)
        ends.add([(topic, 0)])
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        read_to_end(ends, apply)
    finally:
        consumer.close()
    return latest


def write_plan(bootstrap: str, spec: ComputationSpec, plan: Plan, kafka: dict | None) -> None:
    producer = Producer(producer_config(bootstrap, extra=kafka))
    producer.produce(backfill_topic(spec), plan.to_json(), PLAN_KEY.encode(), partition=0)
    if producer.flush(30):
        raise PipelineError(f"could not write the plan to {backfill_topic(spec)}")


# -- making a plan ----------------------------------------------------------------------------


def resolve_ranges(
    consumer: Consumer, spec: ComputationSpec, start: str, until: str
) -> tuple[Range, ...]:
    """Per topic-partition the computation consumes: from the group's committed offset (else
    `start`) to `until` for its input streams, to the current end for its `.by-key` topics."""
    begin, finish = parse_point(start), parse_point(until)
    metadata = consumer.list_topics(timeout=30).topics
    ranges = []
    for topic, (stream, keyed) in input_topics(spec).items():
        end_point = finish if topic == stream else "latest"
        if topic not in metadata:
            raise PipelineError(f"topic {topic!r} does not exist: run `logwheel topics` first")
        tps = [TopicPartition(topic, p) for p in sorted(metadata[topic].partitions)]
        committed = consumer.committed(tps, timeout=30)
        for tp, have in zip(tps, committed, strict=True):
            low, high = consumer.get_watermark_offsets(tp, 30)
            first = have.offset if have.offset >= 0 else offset_at(consumer, tp, begin, low, high)
            last = offset_at(consumer, tp, end_point, low, high)
            ranges.append(Range(topic, tp.partition, first, max(first, last), stream, keyed))
    return tuple(ranges)


def input_topics(spec: ComputationSpec) -> dict[str, tuple[str, bool]]:
    """Every topic a backfill of `spec` reads, with the input stream it carries and whether its
    Kafka key is the computation's key (`Range.stream`, `Range.keyed`): each input stream,
    and the `.by-key` topic of each input it re-keys. Not its replay topic: dead letters sent
    back by `logwheel dlq replay` wait there, their offsets untouched, for `logwheel run`."""
    topics = {}
    for i in spec.inputs:
        topics[i.stream] = (i.stream, i.key is None)
        if i.key is not None:
            topics[spec.by_key(i.stream)] = (i.stream, True)
    return topics


def journal_ends(consumer: Consumer, topic: str, partitions: int) -> dict[int, int]:
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
        for p in range(partitions)
    }


def start_watermarks(
    bootstrap: str, spec: ComputationSpec, kafka: dict | None
) -> tuple[dict[int, int], dict[str, Any]]:
    """The input watermark each keyed task last published (MIN_TIME where none), and the
    latest marks by producer, from the computation's own watermark channel."""
    raws = read_compacted(bootstrap, spec.watermarks, reader_group(spec.group), kafka)
    marks = {mark.producer: mark for mark in genuine_marks(spec.watermarks, raws.values())}
    watermarks = {}
    for p in range(spec.partitions):
        mark = marks.get(task_producer(spec.name, p))
        watermarks[p] = MIN_TIME if mark is None else mark.input_watermark
    return watermarks, marks


def genuine_marks(
    channel: str, raws: Iterable[bytes], allowance_ms: int = DEFAULT_ALLOWANCE_MS
) -> list[Mark]:
    """The marks of a channel that decode and claim no time beyond the allowance ahead of wall
    time (framework/core/forgery.py); the others are skipped and counted."""
    marks, now = [], now_ms()
    for raw in raws:
        try:
            mark = decode_mark(raw)
            check_mark(mark, now, allowance_ms)
        except Exception as error:
            undecodable(channel, error)
        else:
            marks.append(mark)
    return marks


def lag_of(pipeline: Pipeline, spec: ComputationSpec) -> int:
    """How far the watermark trails the data while the backfill reads it: the largest bound of
    its `BoundedOutOfOrderness` inputs, 0 for inputs whose watermark is published."""
    bounds = [
        source.watermark.ms
        for i in spec.inputs
        if (source := pipeline.sources.get(i.stream)) is not None
        and isinstance(source.watermark, BoundedOutOfOrderness)
    ]
    return max(bounds, default=0)


def end_watermark(
    pipeline: Pipeline,
    spec: ComputationSpec,
    ranges: tuple[Range, ...],
    max_timestamps: dict[tuple[str, int], int],
    bootstrap: str,
    kafka: dict | None,
) -> int | None:
    """The computation's input watermark once it has read the whole range, as streaming
    would compute it: per input, the minimum over its partitions that carry records within
    the skew allowance (`max_timestamps` holds only those; any other is idle) of the highest
    timestamp less the bound (`BoundedOutOfOrderness`), or what the writers' marks on their
    channels promise for the end of the range (injectors, upstream computations). None when
    some input's watermark is never known."""
    reader = reader_group(spec.group)
    allowance_ms = pipeline_allowance(pipeline)
    marks: dict[str, list] = {}  # channel -> its marks, each channel read once

    def marks_of(channel: str) -> list:
        if channel not in marks:
            raw = read_compacted(bootstrap, channel, reader, kafka).values()
            marks[channel] = genuine_marks(channel, raw, allowance_ms)
        return marks[channel]

    per_input = []
    for i in spec.inputs:
        mine = [r for r in ranges if r.stream == i.stream]
        source = pipeline.sources.get(i.stream)
        if source is not None and isinstance(source.watermark, BoundedOutOfOrderness):
            # a partition with no record within the skew allowance is idle, as in streaming
            highs = [max_timestamps.get((r.topic, r.partition)) for r in mine if r.end > r.start]
            highs = [high for high in highs if high is not None]
            if highs:
                per_input.append(min(highs) - source.watermark.ms)
            continue
        if source is not None and source.watermark is None:
            return None
        stream_ranges = [r for r in mine if r.topic == i.stream]
        values = []
        for r in stream_ranges:
            published, channels = partition_watermark(pipeline, i.stream, r.topic, r.partition)
            assert isinstance(published, Published)
            for channel in channels:
                for mark in marks_of(channel):
                    published.offer(mark)
            published.advance(r.end)
            values.append(published.value())
        known = [w for w, idle in values if not idle]
        if any(w is None for w in known):
            return None
        if known:
            per_input.append(min(known))
    return min(per_input) if per_input else None
