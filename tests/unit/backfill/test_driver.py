"""The backfill driver's decisions around Spark and Kafka (backfill/driver.py): the marks it
hands over to streaming, what its summary counts, and what it refuses before anything
starts. The run itself is tests/integration/test_backfill*.py."""

from __future__ import annotations

import pytest

from framework import BoundedOutOfOrderness, Computation, InjectorWatermark, Percentile, Pipeline
from framework.backfill.driver import backfill, hand_over_marks, summary_of
from framework.backfill.plan import Plan, Range
from framework.core.api import MIN_TIME
from framework.core.pipeline import PipelineError
from framework.core.watermarks import Mark


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def pipeline(**kw) -> Pipeline:
    p = Pipeline("bf", partitions=2)
    p.source("clicks", watermark=BoundedOutOfOrderness(ms=1000))
    p.source("queries", watermark=InjectorWatermark("gen", 1))
    p.computation("c", Noop, inputs={"clicks": None}, outputs={"out": None}, **kw)
    p.computation("q", Noop, inputs={"queries": None}, outputs={"out2": None})
    return p


def plan(end: int | None, tasks: int = 2) -> Plan:
    return Plan(
        computation="c",
        ranges=(Range("clicks", 0, 0, 10, "clicks", False),),
        tasks=tasks,
        changelog_end={},
        timers_end={},
        start_watermarks={},
        end_watermark=end,
        lag=0,
    )


def test_each_partition_gets_the_plans_end_held_back_by_its_earliest_timer():
    spec = pipeline()["c"]
    results = [
        {"written": [["out", 0, 7], ["out", 1, 3], ["bf.c.dlq", 0, 99]], "earliest_timers": {}},
        {"written": [["out", 0, 5]], "earliest_timers": {"1": 4000, "0": 9000}},
        {"written": [], "earliest_timers": {"1": 2500}},
    ]
    marks = hand_over_marks(spec, plan(5000), results, {}, {"out": 3})
    assert [m.producer for m in marks] == ["c/task/0", "c/task/1"]
    assert [(m.watermark, m.input_watermark) for m in marks] == [(5000, 5000), (2500, 5000)]
    # the last offset per output partition, every partition named (-1: nothing written);
    # the dead letters are no output of the computation
    expected = {("out", 0): 7, ("out", 1): 3, ("out", 2): -1}
    assert all(m.offsets == expected and not m.idle for m in marks)


def test_a_mark_never_goes_back_from_the_one_it_replaces():
    spec = pipeline()["c"]
    before = Mark("c/task/0", 8000, False, {("out", 0): 9, ("out", 1): 1}, 8500)
    # a timer the backfill left at 3000 would take partition 0's watermark back: it holds
    results = [{"written": [["out", 1, 4]], "earliest_timers": {"0": 3000}}]
    marks = hand_over_marks(spec, plan(5000), results, {before.producer: before}, {"out": 2})
    assert (marks[0].watermark, marks[0].input_watermark) == (8000, 8500)
    assert marks[0].offsets == {("out", 0): 9, ("out", 1): 4}
    assert (marks[1].watermark, marks[1].input_watermark) == (5000, 5000)  # no mark before


def test_an_unknown_end_hands_over_no_watermark_at_all():
    marks = hand_over_marks(pipeline()["c"], plan(None), [], {}, {})
    assert {(m.watermark, m.input_watermark) for m in marks} == {(MIN_TIME, MIN_TIME)}


def test_a_percentile_computation_promises_the_strict_end_not_its_own_input_watermark():
    spec = pipeline(low_watermark=Percentile(0.9))["c"]
    before = Mark("c/task/0", 1000, False, {}, 7000)  # its percentile watermark ran ahead
    [first, _] = hand_over_marks(spec, plan(5000), [], {before.producer: before}, {})
    assert (first.watermark, first.input_watermark) == (5000, 7000)


def test_the_summary_counts_the_tasks_this_run_ran_and_the_ones_it_skipped():
    ran = {"records_in": 10, "records_out": 4, "keys": 3, "dead_letters": 1, "late": 2}
    results = [ran, dict(ran, records_in=5), {"skipped": True, **ran}]
    summary = summary_of(plan(0, tasks=3), results, 2.0, resumed=True)
    assert (summary.records_in, summary.records_out, summary.keys) == (15, 8, 6)
    assert (summary.dead_letters, summary.late, summary.tasks, summary.skipped) == (2, 4, 3, 1)
    line = summary.line("bf.c")
    assert line.startswith("backfill bf.c: 15 records in, 8 out, 6 keys, 2 dead letters, 2.0 s")
    assert "8 records/s" in line and "1 tasks were done" in line
    assert "tasks were done" not in summary_of(plan(0), [], 0.0, resumed=False).line("bf.c")


def test_a_computation_with_tables_is_refused_before_spark_or_kafka_is_asked():
    p = pipeline()
    p.computation("t", Noop, inputs={"clicks": None}, tables={"profiles": "profiles"})
    with pytest.raises(PipelineError, match="reads tables \\['profiles'\\].*`logwheel reset`"):
        backfill(p, "t", bootstrap="127.0.0.1:1")
