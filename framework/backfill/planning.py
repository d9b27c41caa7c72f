"""Making a backfill plan (backfill/plan.py) from where the computation stands, as Kafka says
it now and as Spark reads the range.

Per topic-partition it consumes, the range runs from the group's committed offset (else
`--from`) to `--until` (fixed when the plan is made), and on the `.by-key` topics from the
committed offset to their end; its changelog and timer journal (and id journal, with dedup) are
read up to their current end; it starts from the input watermark its tasks last published, and
ends at the input watermark the data and the watermark channels say the range reaches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from framework.backfill.frames import max_timestamps
from framework.backfill.plan import Plan, Range, co_partitioned, input_topics
from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.dead_letters import undecodable
from framework.core.forgery import DEFAULT_ALLOWANCE_MS, check_mark, pipeline_allowance
from framework.core.future_records import future_limits
from framework.core.part import reader_group
from framework.core.pipeline import BoundedOutOfOrderness, ComputationSpec, Pipeline, PipelineError
from framework.core.watermarks import (
    Mark,
    Published,
    decode_mark,
    partition_watermark,
    task_producer,
)
from framework.kafka.config import consumer_config
from framework.kafka.topic_ends import offset_at, parse_point, read_compacted


def make_plan(
    spark: Any,
    pipeline: Pipeline,
    spec: ComputationSpec,
    bootstrap: str,
    kafka: dict,
    start: str,
    until: str,
    tasks: int | None,
    arrow: bool,
) -> Plan:
    """The plan of a backfill of `spec` from where it stands now, its input streams read from
    `start` where the group has no committed offset to `until`; split into `tasks`, else a task
    per partition of an input read by its Kafka key (on the Arrow path), else Spark's default
    parallelism, and never into more tasks than it has rows."""
    consumer = Consumer(consumer_config(bootstrap, reader=spec.group, extra=kafka))
    try:
        ranges = resolve_ranges(consumer, spec, start, until)
        changelog_end = journal_ends(consumer, spec.changelog, spec.partitions)
        timers_end = journal_ends(consumer, spec.timers, spec.partitions)
        ids_end = journal_ends(consumer, spec.ids, spec.partitions) if spec.dedup else {}
    finally:
        consumer.close()
    lag = lag_of(pipeline, spec)
    bounded = _bounded(pipeline, spec)
    wall = now_ms()  # the plan's wall time: what is from the future is so for all its tasks
    limits = future_limits(pipeline, [i.stream for i in spec.inputs], wall)
    highs = max_timestamps(spark, ranges, bootstrap, kafka, limits) if bounded else {}
    starts, _ = start_watermarks(bootstrap, spec, kafka)
    end = end_watermark(pipeline, spec, ranges, highs, bootstrap, kafka)
    plan = Plan(
        computation=spec.name,
        ranges=ranges,
        # input keyed by its producer: a task per partition, no shuffle (frames.events)
        tasks=tasks
        or (arrow and co_partitioned(ranges))
        or max(1, spark.sparkContext.defaultParallelism),
        changelog_end=changelog_end,
        timers_end=timers_end,
        ids_end=ids_end,
        start_watermarks=starts,
        end_watermark=end,
        lag=lag,
        created_at=wall,
    )
    # no task that could be given nothing (and a stored plan with more is refused)
    return replace(plan, tasks=min(plan.tasks, plan.most_tasks()))


def _bounded(pipeline: Pipeline, spec: ComputationSpec) -> bool:
    """Whether some input's watermark follows its data (so the range's timestamps matter)."""
    policies = [getattr(pipeline.sources.get(i.stream), "watermark", None) for i in spec.inputs]
    return any(isinstance(p, BoundedOutOfOrderness) for p in policies)


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
