"""The backfill's plan without a broker: its JSON form (what a rerun reads back), its id
(what the tasks' transactional ids derive from) and the watermark at the end of the range."""

from __future__ import annotations

import pytest

from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by
from framework.backfill.driver import backfill
from framework.backfill.plan import Plan, Range, co_partitioned, end_watermark, lag_of
from framework.core.api import MIN_TIME
from framework.core.pipeline import PipelineError


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def plan(**changes) -> Plan:
    fields = dict(
        computation="count",
        ranges=(Range("in", 0, 5, 90, "in", False), Range("p.c.in.by-key", 1, 0, 3, "in", True)),
        tasks=4,
        changelog_end={0: 10, 1: 0},
        timers_end={0: 0, 1: 2},
        start_watermarks={0: MIN_TIME, 1: 1_000},
        end_watermark=5_000,
        lag=2_000,
    )  # fmt: skip
    return Plan(**{**fields, **changes})


def test_a_plan_reads_back_as_written_with_the_same_id():
    written = plan()
    read = Plan.from_json(written.to_json())
    assert read == written and read.id == written.id
    assert read.start_watermark == MIN_TIME and read.records() == 88


def test_the_id_follows_the_ranges_and_the_split_only():
    assert plan(created_at=1, status="done").id == plan(created_at=2).id
    assert plan(tasks=5).id != plan().id
    assert plan(ranges=(Range("in", 0, 5, 91, "in", False),)).id != plan().id


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


def test_a_computation_with_tables_is_refused_at_start_naming_the_way_out():
    pipeline = Pipeline("p").source("in")
    pipeline.computation("join", Nothing, inputs={"in": None}, tables={"t": "p.other.changelog"})
    with pytest.raises(PipelineError, match="logwheel reset"):
        backfill(pipeline, "join", bootstrap="unused:1")


def test_input_keyed_by_its_producer_is_read_a_task_per_partition_without_a_shuffle():
    keyed = (Range("words", 0, 0, 9, "words", True), Range("words", 1, 4, 7, "words", True))
    assert co_partitioned(keyed) == 2
    assert co_partitioned((*keyed, Range("words", 2, 5, 5, "words", True))) == 2  # empty
    assert co_partitioned((*keyed, Range("lines", 0, 0, 3, "lines", True))) is None
    assert co_partitioned((*keyed, Range("q", 0, 0, 3, "q", False))) is None
    assert co_partitioned(()) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(extra=1), "has not exactly the fields"),
        (lambda d: d.pop("lag"), "has not exactly the fields"),
        (lambda d: d.update(tasks="4"), "tasks='4' is not a whole number"),
        (lambda d: d.update(tasks=0), "tasks=0 is not a whole number in \\[1,"),
        (lambda d: d["ranges"][0].update(end=1), "end=1 is not a whole number in \\[5,"),
        (lambda d: d["ranges"][0].update(__class__="x"), "a range has not exactly the fields"),
        (lambda d: d["ranges"][0].update(keyed="yes"), "keyed='yes' is not true or false"),
        (lambda d: d["changelog_end"].update(x=1), "changelog_end names partition 'x'"),
        (lambda d: d.update(end_watermark=2**62), "end_watermark=.* is not a whole number"),
        (lambda d: d["start_watermarks"].update({"0": 2**62}), "0=.* is not a whole number"),
        (lambda d: d.update(status="hacked"), "status='hacked'"),
        (lambda d: d.update(id="0" * 16), "is not its ranges'"),
        (lambda d: d.update(ranges={}), "ranges is not a list"),
    ],
)
def test_a_stored_plan_that_logwheel_could_not_have_written_is_refused_naming_the_fix(
    change, message
):
    import json

    from framework.backfill.plan import PlanError

    doc = json.loads(plan().to_json())
    change(doc)
    with pytest.raises(PlanError, match=f"not one logwheel wrote \\(.*{message}.*delete the"):
        Plan.from_json(json.dumps(doc).encode())
    with pytest.raises(PlanError, match="not one logwheel wrote"):
        Plan.from_json(b"[1, 2]")


def test_a_partition_whose_records_are_all_beyond_the_allowance_is_idle_at_the_end():
    """`max_timestamps` leaves such records out, so such a partition has no high: it neither
    holds the end watermark back nor pushes it forward, as in streaming."""
    pipeline = Pipeline("p").source("in", watermark=BoundedOutOfOrderness(ms=2_000))
    pipeline.computation("count", Nothing, inputs={"in": None})
    ranges = (Range("in", 0, 0, 10, "in", True), Range("in", 1, 0, 1, "in", True))
    highs = {("in", 0): 50_000}  # partition 1 holds one record, from the future
    assert end_watermark(pipeline, pipeline["count"], ranges, highs, "unused:1", None) == 48_000
    assert end_watermark(pipeline, pipeline["count"], ranges[1:], {}, "unused:1", None) is None
