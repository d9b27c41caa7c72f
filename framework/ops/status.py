"""`logwheel status` and `logwheel graph`: what a pipeline looks like and how far behind it is,
per part and partition its group reads."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from rich.table import Table

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.part import Part, reader_group
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.core.watermarks import Mark, repartition_producer, task_producer
from framework.kafka.config import client_config, consumer_config
from framework.kafka.errors import Unreachable
from framework.ops.holdback import held_back_by, upstream
from framework.ops.members import group_members, owners
from framework.ops.topology import to_dot, topology
from framework.streaming.channels import WatermarkChannels

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Status:
    """One partition a part's group reads, as `logwheel status` shows it."""

    computation: str  # the part (a computation, or a sink)
    topic: str
    partition: int
    low_watermark: int | None  # of the task reading it; None: not known yet
    lag_ms: int | None  # how far that watermark is behind wall time
    consumer_lag: int | None  # records (not transaction markers) yet to read; None: no commit
    last_commit: int | None  # ms since the epoch, from the committed offset's metadata
    owner: str | None  # the group member holding it (its instance id), None: nobody
    percentile_watermark: int | None = None  # what a Percentile computation fires on
    percentile_late: int | None = None  # records late only because of that percentile
    held_back_by: str | None = None  # the upstream producer whose watermark is the lowest
    offset: int | None = None  # the committed offset (the next to read); None: no commit


_COUNT_LIMIT = 100_000
"""Lags up to this many offsets are counted record by record (read_committed, so markers
and aborted records do not count); larger ones are reported in offsets."""


def status(
    pipeline: Pipeline, bootstrap: str, kafka: dict | None = None, now: int | None = None
) -> list[Status]:
    """Per part and partition its group reads: the records yet to read, the last commit and
    the member that owns it; for a part that publishes a watermark, also its reading task's
    low watermark, its lag behind wall time (`now`, else the clock) and the upstream producer
    holding it back."""
    now = now_ms() if now is None else now
    admin = AdminClient(client_config(bootstrap, kafka))
    existing = admin.list_topics(timeout=30).topics
    reader = reader_group(pipeline.name)
    channels = WatermarkChannels(
        Consumer(consumer_config(bootstrap, reader=reader, extra=kafka)), admin
    )
    rows = []
    try:
        followed = set()
        for part in pipeline.parts():
            if part.group is not None and part.watermarks is not None:
                followed.add(part.watermarks)  # and the channels upstream of it
                for i in part.inputs:
                    followed.update(upstream(pipeline, part, i.stream, 0, {})[0])
        channels.follow(sorted(t for t in followed if t in existing))
        try:
            channels.catch_up(timeout=30, settle=False)
        except Unreachable as error:
            log.warning("watermarks may be behind: %s", error)
        for part in pipeline.parts():
            if part.group is not None:
                rows += _part_rows(pipeline, part, admin, existing, channels, now, bootstrap, kafka)
        return rows
    finally:
        channels.close()


def _part_rows(
    pipeline: Pipeline,
    part: Part,
    admin: AdminClient,
    existing: dict,
    channels: WatermarkChannels,
    now: int,
    bootstrap: str,
    kafka: dict | None,
) -> list[Status]:
    owned = owners(group_members(admin, part.group))
    consumer = Consumer(consumer_config(bootstrap, reader=part.group, extra=kafka))
    rows = []
    try:
        tps = _partitions(part.consumed_topics, existing)
        for c in consumer.committed(tps, timeout=30) if tps else ():
            row = Status(
                part.name,
                c.topic,
                c.partition,
                None,
                None,
                _lag(consumer, c),
                _committed_at(c.metadata),
                owned.get((c.topic, c.partition)),
                offset=c.offset if c.offset >= 0 else None,
            )
            if part.watermarks is not None:
                row = _with_watermark(pipeline, part, row, channels, existing, now)
            rows.append(row)
    finally:
        consumer.close()
    return rows


def _with_watermark(
    pipeline: Pipeline,
    spec: ComputationSpec,
    row: Status,
    channels: WatermarkChannels,
    existing: dict,
    now: int,
) -> Status:
    """`row` with the watermark of the task reading its partition, the one a percentile
    fires on, and the upstream producer holding it back."""
    mark = channels.latest(spec.watermarks, _producer(spec, row.topic, row.partition))
    low = None if mark is None or mark.watermark == MIN_TIME else mark.watermark
    firing, late = _percentile(spec, row.topic, mark)
    counts = {i.stream: len(existing[i.stream].partitions)
              for i in spec.inputs if i.stream in existing}  # fmt: skip
    feeds, producers = upstream(pipeline, spec, row.topic, row.partition, counts)
    marks = {p: _latest(channels, feeds, p) for p in producers}
    return replace(
        row,
        low_watermark=low,
        lag_ms=None if low is None else now - low,
        percentile_watermark=firing,
        percentile_late=late,
        held_back_by=held_back_by(marks),
    )


def _partitions(topics: list[str], existing: dict) -> list[TopicPartition]:
    """Every partition of those of `topics` that exist."""
    return [
        TopicPartition(t, p)
        for t in topics
        if t in existing
        for p in sorted(existing[t].partitions)
    ]


def _latest(channels: WatermarkChannels, feeds: list[str], producer: str) -> Mark | None:
    marks = (channels.latest(feed, producer) for feed in feeds)
    return next((m for m in marks if m is not None), None)


def _producer(spec: ComputationSpec, topic: str, partition: int) -> str:
    """The task reading `topic`'s partition: a re-keying task for a re-keyed stream."""
    if any(i.key is not None and i.stream == topic for i in spec.inputs):
        return repartition_producer(spec.name, topic, partition)
    return task_producer(spec.name, partition)


def _percentile(
    spec: ComputationSpec, topic: str, mark: Mark | None
) -> tuple[int | None, int | None]:
    """For a keyed task of a computation with a Percentile: the watermark it fires on (what
    its hooks saw when it published `mark`) and its records late only because of it."""
    if spec.low_watermark is None or topic not in spec.keyed_topics:
        return None, None
    if mark is None:
        return None, 0
    firing = None if mark.input_watermark == MIN_TIME else mark.input_watermark
    return firing, mark.percentile_late


def _committed_at(metadata: str | None) -> int | None:
    try:
        return int(json.loads(metadata)["committed_at"]) if metadata else None
    except (ValueError, KeyError, TypeError):
        return None


def _lag(consumer: Consumer, committed: TopicPartition) -> int | None:
    """Records between the committed offset and the end; transaction markers and aborted
    records are not counted (up to `_COUNT_LIMIT` offsets; beyond, offsets)."""
    if committed.offset < 0:
        return None
    tp = TopicPartition(committed.topic, committed.partition)
    _, high = consumer.get_watermark_offsets(tp, 30)
    if high - committed.offset > _COUNT_LIMIT:
        return high - committed.offset
    if high <= committed.offset:
        return 0
    consumer.assign([TopicPartition(tp.topic, tp.partition, committed.offset)])
    count, last, deadline = 0, None, time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            count += sum(1 for m in consumer.consume(1000, 0.2) if m.error() is None)
            (position,) = consumer.position([tp])
            if position.offset >= high or position.offset == last:  # the end, or an open
                break  # transaction the count stops at
            last = position.offset
    finally:
        consumer.unassign()
    return count


def status_table(pipeline: str, rows: list[Status]) -> Table:
    """The rows as a rich table for a terminal."""
    table = Table(title=f"{pipeline} — {_when(now_ms())} UTC")
    for column in ("computation", "topic", "partition", "low watermark (UTC)", "lag"):
        table.add_column(column, justify="right" if column in ("partition", "lag") else "left")
    for column in ("consumer lag", "last commit (UTC)", "owner"):
        table.add_column(column, justify="right" if column == "consumer lag" else "left")
    percentiles = any(r.percentile_late is not None for r in rows)
    if percentiles:  # only when some computation fires on a Percentile
        table.add_column("percentile watermark (UTC)")
        table.add_column("late by percentile", justify="right")
    held = any(r.held_back_by for r in rows)
    if held:  # only when an upstream producer is behind the others
        table.add_column("held back by")
    for r in rows:
        extra = []
        if percentiles:
            extra = [
                "-" if r.percentile_watermark is None else _when(r.percentile_watermark),
                "-" if r.percentile_late is None else str(r.percentile_late),
            ]
        if held:
            extra.append(r.held_back_by or "-")
        table.add_row(
            r.computation,
            r.topic,
            str(r.partition),
            "unknown" if r.low_watermark is None else _when(r.low_watermark),
            "-" if r.lag_ms is None else f"{r.lag_ms / 1000:.1f}s",
            "-" if r.consumer_lag is None else str(r.consumer_lag),
            "-" if r.last_commit is None else _when(r.last_commit),
            r.owner or "-",
            *extra,
        )
    return table


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def graph(pipeline: Pipeline) -> str:
    """The topology as Graphviz dot (framework/ops/topology.py)."""
    return to_dot(topology(pipeline))
