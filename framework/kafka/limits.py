"""What the broker would refuse, known before producing: each topic's size limit and timestamp
window, read once at start (`max.message.bytes`, `message.timestamp.*`), so a production that
cannot land fails its own hook call (dead-lettered) instead of the commit it would be part of.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, ConfigResource

from framework.core.clock import now_ms
from framework.errors import BadRecord

RECORD_OVERHEAD = 128
"""Bytes of batch and record framing counted on top of key, value and headers (a one-record
batch has 61 bytes of header and up to ~21 of record framing; the rest is margin)."""

DEFAULT_MAX_BYTES = 1_000_000
"""librdkafka's `message.max.bytes`: the producer itself refuses larger messages."""


@dataclass(frozen=True, slots=True)
class Limit:
    max_bytes: int = DEFAULT_MAX_BYTES
    after_ms: int | None = None  # a timestamp may be at most this far ahead of now
    before_ms: int | None = None  # ... and at most this far behind


@dataclass
class TopicLimits:
    """Limits per topic; a topic not read has the producer's defaults only."""

    limits: dict[str, Limit] = field(default_factory=dict)
    producer_max_bytes: int = DEFAULT_MAX_BYTES
    _upper: int = -1  # a timestamp up to here was inside every topic's window lately

    def of(self, topic: str) -> Limit:
        return self.limits.get(topic) or Limit(self.producer_max_bytes)

    def check(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int | None
    ) -> None:
        """Raise BadRecord (stage "produce") if the broker would refuse this record.

        On the per-production path: the usual record (small, timestamped before the last
        known upper bound of the window) costs two comparisons and no clock read."""
        limit = self.limits.get(topic)
        if limit is None:
            return
        size = (len(key) if key else 0) + (len(value) if value else 0) + RECORD_OVERHEAD
        if size > limit.max_bytes:
            raise BadRecord(
                "produce",
                f"a record of {size} bytes for {topic!r} is over its limit of "
                f"{limit.max_bytes} bytes (max.message.bytes): produce smaller values",
            )
        if timestamp is None or (0 <= timestamp <= self._upper and limit.before_ms is None):
            return
        if not self.timestamp_ok(topic, timestamp):
            raise BadRecord(
                "produce",
                f"timestamp {timestamp} is outside {topic!r}'s accepted window "
                f"(now {now_ms()}, at most {limit.after_ms} ms ahead"
                + (f", {limit.before_ms} ms behind" if limit.before_ms is not None else "")
                + "): produce event times near the present",
            )

    def timestamp_ok(self, topic: str, timestamp: int) -> bool:
        limit = self.limits.get(topic)
        if timestamp < 0:
            return False
        if limit is None or (limit.after_ms is None and limit.before_ms is None):
            return True
        now = now_ms()
        afters = [lim.after_ms for lim in self.limits.values() if lim.after_ms is not None]
        self._upper = now + min(afters) if afters else 2**63 - 1
        if limit.after_ms is not None and timestamp > now + limit.after_ms:
            return False
        return limit.before_ms is None or timestamp >= now - limit.before_ms

    def room(self, topic: str, key: bytes | None, headers: list[tuple[str, bytes]]) -> int:
        """How many value bytes a record with this key and headers may carry on `topic`."""
        used = (len(key) if key else 0) + RECORD_OVERHEAD
        used += sum(len(n) + len(v or b"") + 8 for n, v in headers)
        return self.of(topic).max_bytes - used


def read_limits(
    admin: AdminClient,
    topics: Iterable[str],
    producer_max_bytes: int = DEFAULT_MAX_BYTES,
    request_timeout: float = 30,
) -> TopicLimits:
    """The limits of existing `topics`, as their configs (with broker defaults) say.

    librdkafka asks the broker its metadata names controller (`request_timeout` bounds the
    wait for it: a killed one is waited for until the cluster fences it)."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in dict.fromkeys(topics)]
    limits = {}
    described = admin.describe_configs(resources, request_timeout=request_timeout)
    for resource, future in described.items():
        config = {name: entry.value for name, entry in future.result(30).items()}
        append_time = config.get("message.timestamp.type") == "LogAppendTime"
        after = _ms(config.get("message.timestamp.after.max.ms"))
        before = _ms(config.get("message.timestamp.before.max.ms"))
        limits[resource.name] = Limit(
            min(int(config.get("max.message.bytes") or producer_max_bytes), producer_max_bytes),
            None if append_time else after,
            None if append_time else before,
        )
    return TopicLimits(limits, producer_max_bytes)


def _ms(value: str | None) -> int | None:
    """A timestamp bound; Long.MAX_VALUE (the default "no bound") is None."""
    if value is None:
        return None
    ms = int(value)
    return None if ms >= 2**62 else ms
