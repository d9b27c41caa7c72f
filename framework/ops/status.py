"""`logwheel status` and `logwheel graph`: what a pipeline looks like and how far behind it is,
per computation and input partition."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from rich.table import Table

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.core.sink_spec import SinkSpec
from framework.core.watermarks import Mark, repartition_producer, task_producer
from framework.kafka.config import client_config, consumer_config, reader_group
from framework.kafka.errors import Unreachable
from framework.ops.holdback import held_back_by, upstream
from framework.ops.members import group_members, owners
from framework.ops.topology import to_dot, topology
from framework.streaming.channels import WatermarkChannels

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Status:
    """One input partition of one computation, as `logwheel status` shows it."""

    computation: str
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
    """Per computation and input partition: the reading task's low watermark and its lag
    behind wall time (`now`, else the clock), the records yet to read, the last commit, the
    member that owns it and the upstream producer holding its watermark back."""
    now = now_ms() if now is None else now
    admin = AdminClient(client_config(bootstrap, kafka))
    existing = admin.list_topics(timeout=30).topics
    reader = reader_group(pipeline.name)
    channels = WatermarkChannels(
        Consumer(consumer_config(bootstrap, reader=reader, extra=kafka)), admin
    )
    rows = []
    try:
        followed = {s.watermarks for s in pipeline.computations.values()}
        for spec in pipeline.computations.values():  # and the injectors' of its sources
            for i in spec.inputs:
                followed.update(upstream(pipeline, spec, i.stream, 0, {})[0])
        channels.follow(sorted(t for t in followed if t in existing))
        try:
            channels.catch_up(timeout=30, settle=False)
        except Unreachable as error:
            log.warning("watermarks may be behind: %s", error)
        for spec in pipeline.computations.values():
            owned = owners(group_members(admin, spec.group))
            consumer = Consumer(consumer_config(bootstrap, reader=spec.group, extra=kafka))
            try:
                tps = _partitions(spec.consumed_topics, existing)
                for c in consumer.committed(tps, timeout=30) if tps else ():
                    mark = channels.latest(spec.watermarks, _producer(spec, c.topic, c.partition))
                    low = None if mark is None or mark.watermark == MIN_TIME else mark.watermark
                    firing, late = _percentile(spec, c.topic, mark)
                    counts = {i.stream: len(existing[i.stream].partitions)
                              for i in spec.inputs if i.stream in existing}  # fmt: skip
                    feeds, producers = upstream(pipeline, spec, c.topic, c.partition, counts)
                    marks = {p: _latest(channels, feeds, p) for p in producers}
                    rows.append(
                        Status(
                            spec.name,
                            c.topic,
                            c.partition,
                            low,
                            None if low is None else now - low,
                            _lag(consumer, c),
                            _committed_at(c.metadata),
                            owned.get((c.topic, c.partition)),
                            firing,
                            late,
                            held_back_by(marks),
                            c.offset if c.offset >= 0 else None,
                        )
                    )
            finally:
                consumer.close()
        for sink in pipeline.sinks.values():
            rows += _sink_rows(sink, admin, existing, bootstrap, kafka)
        return rows
    finally:
        channels.close()


def _sink_rows(
    sink: SinkSpec, admin: AdminClient, existing: dict, bootstrap: str, kafka: dict | None
) -> list[Status]:
    """A sink's partitions: the lag and last commit of its group's offsets (committed after
    each batch the target took), its owners; no watermark."""
    owned = owners(group_members(admin, sink.group))
    consumer = Consumer(consumer_config(bootstrap, reader=sink.group, extra=kafka))
    try:
        tps = _partitions(sink.consumed_topics, existing)
        return [
            Status(
                sink.name,
                c.topic,
                c.partition,
                None,
                None,
                _lag(consumer, c),
                _committed_at(c.metadata),
                owned.get((c.topic, c.partition)),
                offset=c.offset if c.offset >= 0 else None,
            )
            for c in (consumer.committed(tps, timeout=30) if tps else ())
        ]
    finally:
        consumer.close()


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
