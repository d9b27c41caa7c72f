"""The Harness sets upstream partitions' watermarks (and rates) to show a `Percentile` low
watermark firing: windows of the partitions that keep up close while one partition straggles,
its records are late by the late policy, and the strict watermark still bounds the output's."""

from __future__ import annotations

import pytest

from framework import Percentile, Pipeline, key_by, windows
from framework.testing import Harness

MINUTE = 60_000


def dashboard(low_watermark=None, on_late="dead_letter") -> Harness:
    pipeline = Pipeline("dash")
    pipeline.source("clicks")
    pipeline.windowed(
        "per-minute",
        inputs={"clicks": key_by("page")},
        window=windows.Tumbling(size_ms=MINUTE),
        aggregate=windows.Count(),
        output="clicks-per-minute",
        on_late=on_late,
        low_watermark=low_watermark,
    )
    return Harness(pipeline, "per-minute")


def straggle(h: Harness) -> None:
    """Ninety-nine partitions at 2 minutes, one stalled at 0, all carrying the same rate."""
    h.send("clicks", "x", {"page": "home"}, 30_000)
    for partition in range(100):
        h.set_partition_watermark(partition, 0 if partition == 0 else 2 * MINUTE, rate=5.0)


def test_a_percentile_closes_the_window_a_stalled_partition_holds_and_its_record_is_late():
    h = dashboard(Percentile(0.99))
    straggle(h)
    assert [r.value for r in h.outputs("clicks-per-minute")] == [
        {"key": "home", "start": 0, "end": MINUTE, "value": 1}
    ]
    assert (h.watermark, h.strict_watermark) == (2 * MINUTE, 0)
    assert h.output_watermark() == 0  # what is published downstream stays the strict one
    h.send("clicks", "x", {"page": "home"}, 40_000)  # the stalled partition's record
    ((record, reason),) = h.dead_letters()
    assert record.timestamp == 40_000 and "closed" in reason
    assert (h.late_records, h.percentile_late_records) == (1, 1)


def test_the_default_waits_for_the_stalled_partition():
    h = dashboard()
    straggle(h)
    assert h.outputs("clicks-per-minute") == [] and h.watermark == 0
    h.send("clicks", "x", {"page": "home"}, 40_000)
    assert h.dead_letters() == [] and h.late_records == 0
    h.set_partition_watermark(0, 2 * MINUTE)
    assert [r.value["value"] for r in h.outputs("clicks-per-minute")] == [2]


def test_a_late_record_the_strict_watermark_also_passed_is_not_blamed_on_the_percentile():
    h = dashboard(Percentile(0.99), on_late="drop")
    straggle(h)
    h.set_partition_watermark(0, MINUTE + 1)  # the straggler moves past the first window too
    h.send("clicks", "x", {"page": "home"}, 50_000)
    assert (h.late_records, h.percentile_late_records) == (1, 0)


def test_a_partition_carrying_more_of_the_input_holds_more():
    h = dashboard(Percentile(0.9))
    h.send("clicks", "x", {"page": "home"}, 30_000)
    h.set_partition_watermark(0, 0, rate=50.0)  # half the input is behind
    h.set_partition_watermark(1, 2 * MINUTE, rate=50.0)
    assert h.outputs("clicks-per-minute") == []
    h.set_partition_watermark(0, 0, rate=5.0)  # now a tenth of it
    assert len(h.outputs("clicks-per-minute")) == 1


def test_advance_watermark_still_moves_both():
    h = dashboard(Percentile(0.99))
    h.send("clicks", "x", {"page": "home"}, 30_000)
    h.advance_watermark(MINUTE)
    assert (h.watermark, h.strict_watermark) == (MINUTE, MINUTE)
    assert len(h.outputs("clicks-per-minute")) == 1


def test_setting_a_partition_of_an_input_it_does_not_read_says_which_it_reads():
    h = dashboard()
    with pytest.raises(ValueError, match="does not read 'views'"):
        h.set_partition_watermark(0, 0, stream="views")
