"""What the broker would refuse, checked before producing."""

from __future__ import annotations

import pytest

from framework.core.clock import now_ms
from framework.errors import BadRecord
from framework.kafka.limits import Limit, TopicLimits


def test_size_and_timestamp_window():
    limits = TopicLimits({"t": Limit(max_bytes=1_000, after_ms=3_600_000)})
    limits.check("t", b"k", b"x" * 100, now_ms())
    limits.check("other", b"k", b"x" * 10_000, now_ms() + 10**9)  # unknown topic: no check
    with pytest.raises(BadRecord, match="over its limit of 1000 bytes") as refused:
        limits.check("t", b"k", b"x" * 1_000, now_ms())
    assert refused.value.stage == "produce"
    with pytest.raises(BadRecord, match="outside 't''s accepted window"):
        limits.check("t", b"k", b"v", now_ms() + 2 * 3_600_000)
    with pytest.raises(BadRecord, match="outside"):
        limits.check("t", b"k", b"v", -5)
    limits.check("t", b"k", b"v", now_ms() + 60_000)  # within the hour


def test_a_lower_bound_is_checked_every_time():
    limits = TopicLimits({"t": Limit(after_ms=1_000, before_ms=1_000)})
    limits.check("t", None, b"v", now_ms())
    with pytest.raises(BadRecord):
        limits.check("t", None, b"v", now_ms() - 60_000)


def test_room_for_a_dead_letter():
    limits = TopicLimits({"dlq": Limit(max_bytes=1_000)})
    assert 0 < limits.room("dlq", b"key", [("logwheel.error", b"x" * 100)]) < 1_000 - 100


def test_limits_are_read_within_the_callers_bound():
    """librdkafka waits for the broker its metadata names controller, a killed one included:
    a join passes a bound of a few seconds and tries again with fresh clients."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from framework.kafka.limits import read_limits

    asked = []

    def describe_configs(resources, request_timeout):
        asked.append(request_timeout)
        answer: Future = Future()
        answer.set_result({"max.message.bytes": SimpleNamespace(value="2000")})
        return {r: answer for r in resources}

    admin = SimpleNamespace(describe_configs=describe_configs)
    assert read_limits(admin, ["t"]).of("t").max_bytes == 2000
    assert read_limits(admin, ["t"], request_timeout=5).of("t").max_bytes == 2000
    assert asked == [30, 5]
