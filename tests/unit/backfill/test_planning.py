"""Making a backfill plan without a broker (backfill/planning.py): the input watermark at the
end of the range and how far it trails the data, which inputs make the plan read the range's
timestamps, and which marks of a watermark channel it believes. The reads of Kafka are
tests/integration/test_backfill*.py."""

from __future__ import annotations

from prometheus_client import REGISTRY

from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by
from framework.backfill.plan import Range
from framework.backfill.planning import _bounded, end_watermark, genuine_marks, lag_of
from framework.core.clock import now_ms
from framework.core.watermarks import Mark, encode_mark
from tests.unit.backfill.test_driver import pipeline


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def test_the_end_watermark_of_a_bounded_source_is_its_slowest_partition_with_records():
    pipeline = Pipeline("p").source("in", watermark=BoundedOutOfOrderness(ms=2_000))
    pipeline.computation("count", Nothing, inputs={"in": key_by("k")})
    spec = pipeline["count"]
    ranges = (
        Range("in", 0, 0, 10, "in", False),
        Range("in", 1, 0, 10, "in", False),
        Range("in", 2, 4, 4, "in", False),  # nothing to read: idle, not holding it back
    )
    highs = {("in", 0): 50_000, ("in", 1): 30_000}
    assert end_watermark(pipeline, spec, ranges, highs, "unused:1", None) == 28_000
    assert lag_of(pipeline, spec) == 2_000


def test_an_unwatermarked_source_leaves_the_end_watermark_unknown():
    pipeline = Pipeline("p").source("in")
    pipeline.computation("count", Nothing, inputs={"in": None})
    ranges = (Range("in", 0, 0, 10, "in", True),)
    assert end_watermark(pipeline, pipeline["count"], ranges, {}, "unused:1", None) is None


def test_a_partition_whose_records_are_all_beyond_the_allowance_is_idle_at_the_end():
    """`max_timestamps` leaves such records out, so such a partition has no high: it neither
    holds the end watermark back nor pushes it forward, as in streaming."""
    pipeline = Pipeline("p").source("in", watermark=BoundedOutOfOrderness(ms=2_000))
    pipeline.computation("count", Nothing, inputs={"in": None})
    ranges = (Range("in", 0, 0, 10, "in", True), Range("in", 1, 0, 1, "in", True))
    highs = {("in", 0): 50_000}  # partition 1 holds one record, from the future
    assert end_watermark(pipeline, pipeline["count"], ranges, highs, "unused:1", None) == 48_000
    assert end_watermark(pipeline, pipeline["count"], ranges[1:], {}, "unused:1", None) is None


def test_only_an_input_whose_watermark_follows_its_data_needs_the_ranges_timestamps():
    p = pipeline()
    assert _bounded(p, p["c"]) and not _bounded(p, p["q"])


def test_a_mark_that_does_not_decode_or_claims_a_time_beyond_the_allowance_is_skipped_and_counted():
    channel = "p.c.watermarks"
    now = now_ms()
    genuine = Mark("p.c/0", now - 1_000, False, {("out", 0): 4}, now - 2_000)
    ahead = Mark("p.c/1", now + 3_600_000, False, {}, now - 2_000)  # an hour from now
    labels = {"topic": channel}
    before = REGISTRY.get_sample_value("logwheel_undecodable_internal_records_total", labels)
    marks = genuine_marks(channel, [encode_mark(genuine), encode_mark(ahead), b"{"], 60_000)
    assert marks == [genuine]
    after = REGISTRY.get_sample_value("logwheel_undecodable_internal_records_total", labels)
    assert after == (before or 0) + 2
