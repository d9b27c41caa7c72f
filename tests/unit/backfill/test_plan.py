"""The backfill's plan without a broker (backfill/plan.py): its JSON form (what a rerun reads
back) and the checks of it, its id (what the tasks' transactional ids derive from), and the
split that needs no shuffle."""

from __future__ import annotations

import json

import pytest

from framework import Computation, Pipeline, key_by
from framework.backfill.plan import Plan, PlanError, Range, co_partitioned, input_topics
from framework.core.api import MIN_TIME


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
    doc = json.loads(plan().to_json())
    change(doc)
    with pytest.raises(PlanError, match=f"not one logwheel wrote \\(.*{message}.*delete the"):
        Plan.from_json(json.dumps(doc).encode())
    with pytest.raises(PlanError, match="not one logwheel wrote"):
        Plan.from_json(b"[1, 2]")


def test_a_backfill_reads_each_input_and_the_by_key_topic_of_each_input_it_re_keys():
    pipeline = Pipeline("p").source("in").source("keyed")
    pipeline.computation("count", Nothing, inputs={"in": key_by("k"), "keyed": None})
    spec = pipeline["count"]
    assert input_topics(spec) == {
        "in": ("in", False),
        spec.by_key("in"): ("in", True),
        "keyed": ("keyed", True),
    }
