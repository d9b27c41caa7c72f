"""The wall clock in logwheel's unit (core/clock.py): whole milliseconds since the epoch,
rounded down, so a time is never ahead of the instant it was read."""

from __future__ import annotations

import time

from framework.core import clock


def test_now_is_whole_milliseconds_since_the_epoch_rounded_down(monkeypatch):
    monkeypatch.setattr(time, "time_ns", lambda: 1_700_000_000_123_999_999)
    assert clock.now_ms() == 1_700_000_000_123
    monkeypatch.setattr(time, "time_ns", lambda: 1_700_000_000_124_000_000)
    assert clock.now_ms() == 1_700_000_000_124


def test_now_is_an_int_the_system_clock_agrees_with():
    before = time.time_ns() // 1_000_000
    now = clock.now_ms()
    assert type(now) is int and before <= now <= time.time_ns() // 1_000_000
