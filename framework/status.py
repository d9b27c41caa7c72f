"""`logwheel status` and `logwheel graph`: what a pipeline looks like and how far behind it is."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.api import MIN_TIME
from framework.kafka import client_config, consumer_config
from framework.pipeline import ComputationSpec, Pipeline
from framework.watermarks import WatermarkChannels, task_producer


@dataclass(frozen=True)
class Status:
    computation: str
    low_watermark: int | None  # None: not every task has reported
    lag_ms: int | None
    consumer_lag: int | None  # records not yet consumed; None: the group never committed


def status(pipeline: Pipeline, bootstrap: str, kafka: dict | None = None) -> list[Status]:
    """Per computation: the minimum of its tasks' published watermarks, its lag behind wall
    time, and the records its consumer group has yet to read."""
    now = time.time_ns() // 1_000_000
    existing = set(AdminClient(client_config(bootstrap, kafka)).list_topics(timeout=30).topics)
    channels = WatermarkChannels(consumer_config(bootstrap, extra=kafka))
    try:
        channels.follow(
            s.watermarks for s in pipeline.computations.values() if s.watermarks in existing
        )
        channels.catch_up()
        rows = []
        for spec in pipeline.computations.values():
            marks = [
                channels.latest(spec.watermarks, task_producer(spec.name, p))
                for p in range(spec.partitions)
            ]
            values = [m.watermark for m in marks if m is not None]
            known = len(values) == spec.partitions and MIN_TIME not in values
            low = min(values) if known else None
            lag = None if low is None else now - low
            rows.append(Status(spec.name, low, lag, _consumer_lag(bootstrap, spec, kafka)))
        return rows
    finally:
        channels.close()


def _consumer_lag(bootstrap: str, spec: ComputationSpec, kafka: dict | None) -> int | None:
    config = consumer_config(bootstrap, extra=kafka)
    config["group.id"] = spec.group
    consumer = Consumer(config)
    try:
        topics = spec.consumed_topics
        metadata = consumer.list_topics(timeout=10).topics
        tps = [
            TopicPartition(t, p) for t in topics if t in metadata for p in metadata[t].partitions
        ]
        committed = consumer.committed(tps, timeout=10)
        if all(c.offset < 0 for c in committed):
            return None
        lag = 0
        for c in committed:
            low, high = consumer.get_watermark_offsets(TopicPartition(c.topic, c.partition), 10)
            lag += high - (c.offset if c.offset >= 0 else low)
        return lag
    finally:
        consumer.close()


def graph(pipeline: Pipeline) -> str:
    """The topology as Graphviz dot: streams are ellipses, computations boxes."""
    lines = [f'digraph "{pipeline.name}" {{', "  rankdir=LR;"]
    for stream in pipeline.streams():
        lines.append(f'  "s:{stream}" [label="{stream}", shape=ellipse];')
    for spec in pipeline.computations.values():
        lines.append(f'  "c:{spec.name}" [label="{spec.name}", shape=box];')
        for i in spec.inputs:
            label = "" if i.key is None else f' [label="{getattr(i.key, "field", "by key")}"]'
            lines.append(f'  "s:{i.stream}" -> "c:{spec.name}"{label};')
        for out in spec.outputs:
            lines.append(f'  "c:{spec.name}" -> "s:{out}";')
    lines.append("}")
    return "\n".join(lines)
