"""Percentile low watermarks, the arithmetic (framework/core/percentile.py): the largest time
that upstream partitions holding a fraction of the recent input have passed, weighed by rate."""

from __future__ import annotations

import pytest

from framework import Percentile
from framework.core.percentile import RecentRate, Weighted, percentile_watermark
from framework.core.pipeline import PipelineError
from framework.core.watermarks import Mark


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def busy(*pairs: tuple[int, float]) -> list[tuple[int | None, bool, float]]:
    return [(w, False, rate) for w, rate in pairs]


SEVEN_AND_A_STRAGGLER = busy(*[(100_000 + i, 10.0) for i in range(7)], (1_000, 10.0))


def test_seven_of_eight_equal_partitions_pass_85_percent():
    assert percentile_watermark(SEVEN_AND_A_STRAGGLER, 0.85) == (100_000, False)


def test_more_than_seven_eighths_waits_for_the_straggler():
    assert percentile_watermark(SEVEN_AND_A_STRAGGLER, 0.9) == (1_000, False)


def test_a_fraction_of_one_is_the_strict_minimum():
    assert percentile_watermark(SEVEN_AND_A_STRAGGLER, 1.0) == (1_000, False)


def test_partitions_are_weighed_by_their_rate_not_counted():
    # the straggler carries half the input: 85% of it cannot be had without it
    units = busy((5_000, 1.0), (4_000, 1.0), (1_000, 2.0))
    assert percentile_watermark(units, 0.85) == (1_000, False)
    # a slow straggler carrying a tenth of it is left behind at 85%
    units = busy((5_000, 4.5), (4_000, 4.5), (1_000, 1.0))
    assert percentile_watermark(units, 0.85) == (4_000, False)


def test_a_partition_with_no_recent_input_weighs_nothing():
    units = busy((5_000, 3.0), (1_000, 0.0))
    assert percentile_watermark(units, 0.99) == (5_000, False)


def test_with_no_rate_known_yet_it_is_the_strict_minimum():
    units = busy((5_000, 0.0), (1_000, 0.0))
    assert percentile_watermark(units, 0.5) == (1_000, False)


def test_unknown_until_every_busy_partition_reported_and_idle_ones_left_out():
    assert percentile_watermark([(5_000, False, 1.0), (None, False, 1.0)], 0.5) == (None, False)
    units = [(5_000, False, 1.0), (None, True, 0.0), (1_000, True, 9.0)]
    assert percentile_watermark(units, 0.99) == (5_000, False)
    assert percentile_watermark([(None, True, 1.0)], 0.5) == (None, True)


def test_never_below_the_strict_minimum():
    for fraction in (0.01, 0.3, 0.5, 0.77, 0.99, 1.0):
        w, _ = percentile_watermark(SEVEN_AND_A_STRAGGLER, fraction)
        assert w >= min(u[0] for u in SEVEN_AND_A_STRAGGLER)


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5, "0.9", True])
def test_a_percentile_outside_zero_to_one_fails_at_declaration(fraction):
    with pytest.raises(PipelineError, match="0 < fraction <= 1"):
        Percentile(fraction)


def test_the_rate_is_the_growth_over_the_last_minute():
    clock = Clock()
    rate = RecentRate(clock)
    assert rate.rate() == 0.0
    for second in range(0, 121):
        clock.now = second
        rate.add(second * 30)  # 30 records a second
        if second == 0:
            assert rate.rate() == 0.0
    assert rate.rate() == pytest.approx(30.0)
    clock.now = 150  # silent for 30 s: half a minute's records are in the window
    assert rate.rate() == pytest.approx(15.0)
    clock.now = 200
    assert rate.rate() == 0.0


def test_a_count_that_starts_over_starts_the_rate_over():
    clock = Clock()
    rate = RecentRate(clock)
    for second, count in ((0, 1000), (10, 2000), (20, 5)):
        clock.now = second
        rate.add(count)
    assert rate.rate() == 0.0


def test_samples_closer_than_a_second_are_merged():
    clock = Clock()
    rate = RecentRate(clock)
    for i in range(10_000):
        clock.now = i / 1000  # 10 s of samples a millisecond apart
        rate.add(i)
    assert len(rate._samples) <= 12
    assert rate.rate() == pytest.approx(9_999 / 60)


def test_weighted_marks_weigh_each_upstream_producer_by_how_far_it_read():
    clock = Clock()
    producers = [f"c/by-key/s/{r}" for r in range(3)]
    weighted = Weighted("p.c.s.by-key", 0, producers, clock)
    for second in range(0, 61, 5):
        clock.now = second
        for r, producer in enumerate(producers):
            watermark = 1_000 if r == 2 else 100_000 + second
            mark = Mark(producer, watermark, False, {}, read=second * (10 if r < 2 else 1))
            weighted.offer(mark)
    weighted.advance(1)
    units = weighted.units()
    assert [u[0] for u in units] == [100_060, 100_060, 1_000]
    assert [round(u[2], 1) for u in units] == [10.0, 10.0, 1.0]
    assert percentile_watermark(units, 0.9) == (100_060, False)
    assert weighted.value() == (1_000, False)  # the strict one, as Published gives it


def test_a_stalled_partition_stops_holding_a_99_percent_watermark_within_the_minute():
    """The README's dashboard: eight partitions at the same rate; one stalls (no records, no
    progress) and, once its share of the last minute's input is under 1%, is left behind."""
    clock = Clock()
    producers = [f"c/by-key/s/{r}" for r in range(8)]
    weighted = Weighted("p.c.s.by-key", 0, producers, clock)
    held = {}
    for second in range(0, 181):
        clock.now = second
        for r, producer in enumerate(producers):
            t = min(second, 60) if r == 7 else second  # partition 7 stalls at 60 s
            weighted.offer(Mark(producer, 1_000 * t, False, {}, read=10 * t))
        weighted.advance(1)
        held[second] = percentile_watermark(weighted.units(), 0.99)[0] == 60_000
    assert held[61] and held[110]  # it still carries more than 1% of the last minute
    assert not held[120] and not held[180]
