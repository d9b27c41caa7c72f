"""Reading topics: where a point in a partition lies, and where a partition ends."""

from __future__ import annotations

import time
from datetime import datetime

from confluent_kafka import Consumer, KafkaException, TopicPartition

from framework.core.pipeline import PipelineError
from framework.kafka.config import unreachable

POINTS = ("earliest", "latest")


def parse_point(to: str) -> str | int:
    """`earliest`, `latest`, or an ISO date-time as milliseconds since the epoch."""
    if to in POINTS:
        return to
    try:
        moment = datetime.fromisoformat(to)
    except ValueError:
        raise PipelineError(
            f"--to {to!r}: use earliest, latest or an ISO date-time like 2026-11-21T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        raise PipelineError(f"--to {to!r}: give a time zone, e.g. {to}Z or {to}+01:00")
    return int(moment.timestamp() * 1000)


def offset_at(consumer: Consumer, tp: TopicPartition, where: str | int, low: int, high: int) -> int:
    """The offset of `where` (earliest, latest or a time in ms) in `tp`, whose offsets run
    from `low` to `high`: the first record at or after the time, else the end."""
    if where == "earliest":
        return low
    if where == "latest":
        return high
    found = consumer.offsets_for_times([TopicPartition(tp.topic, tp.partition, where)], 30)[0]
    return found.offset if found.offset >= 0 else high


def watermark_offsets(
    consumer: Consumer, tp: TopicPartition, timeout: float = 30
) -> tuple[int, int]:
    """(low, high) of `tp`, asked again while its leader is moving (a broker restarting, a
    topic just created) until `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout)
        except KafkaException as error:
            if not unreachable(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
