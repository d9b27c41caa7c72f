"""bench/idle.py's arithmetic: CPU and wake-ups over the idle window, not since the start."""

from __future__ import annotations

import os

from bench import idle


def test_cpu_and_wake_ups_count_only_what_happened_between_the_samples() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    before = {7: {70: ("python", 5 * tick, 1000)}}  # start-up CPU and switches, not counted
    after = {
        7: {70: ("python", 5 * tick + tick // 10, 1020), 71: ("rdk:broker", tick // 10, 30)},
        8: {80: ("python", 3 * tick, 500)},  # a process first seen after: all of it counts
    }
    busy, fresh = idle.costs(before, after, seconds=10.0)
    assert busy["pid"] == 7 and busy["threads"] == 2
    assert busy["cpu_pct"] == 100 * (2 * (tick // 10)) / tick / 10
    assert busy["wakeups_per_s"] == {"python": 2.0, "rdk:broker": 3.0}
    assert fresh["cpu_pct"] == 100 * 3 / 10
