"""The backfill's plan without a broker: its JSON form (what a rerun reads back), its id
(what the tasks' transactional ids derive from) and the watermark at the end of the range."""

from __future__ import annotations

import pytest

from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by
from framework.backfill.driver import backfill
from framework.backfill.plan import Plan, Range, co_partitioned, end_watermark, lag_of
from framework.backfill.task import _fault
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


def test_the_fault_switch_hits_only_the_first_attempt_of_its_task():
    assert _fault("1:10", 1, 0) == (10, False)
    assert _fault("1:10:stall", 1, 0) == (10, True)
    assert _fault("1:10", 1, 1) is None and _fault("1:10", 0, 0) is None
    assert _fault(None, 0, 0) is None


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
