"""An unfinished stored plan is this computation's or refused (backfill/stored_plan.py): its
name, the topics it reads with their partition counts and ends, its key space and its task
count, against the topics' ends as they are now (given here; a real broker in
tests/integration/test_backfill.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from framework import Computation, Dedup, Pipeline, key_by
from framework.backfill.plan import Plan, PlanError, Range
from framework.backfill.stored_plan import refuse_foreign


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def spec(**kw):
    p = Pipeline("p", partitions=2)
    p.source("in")
    p.computation("count", Nothing, inputs={"in": key_by("word")}, **kw)
    return p["count"]


ENDS = {"in": [90, 40, 7], "p.count.in.by-key": [3, 5], "p.count.changelog": [10, 0],
        "p.count.timers": [0, 2], "p.count.ids": [4, 4]}  # fmt: skip


def plan(**changes) -> Plan:
    fields = dict(
        computation="count",
        ranges=(Range("in", 0, 5, 90, "in", False), Range("in", 1, 0, 40, "in", False),
                Range("in", 2, 7, 7, "in", False), Range("p.count.in.by-key", 0, 0, 3, "in", True),
                Range("p.count.in.by-key", 1, 5, 5, "in", True)),
        tasks=4,
        changelog_end={0: 10, 1: 0},
        timers_end={0: 0, 1: 2},
        start_watermarks={0: -(2**63), 1: 1_000},
        end_watermark=5_000,
        lag=2_000,
    )  # fmt: skip
    return Plan(**{**fields, **changes})


def refused(stored: Plan, ends: dict = ENDS, **kw) -> str:
    with pytest.raises(PlanError) as error:
        refuse_foreign(stored, spec(**kw), ends.get)
    message, topic = str(error.value), "p.count.backfill"
    assert "\n" not in message
    assert message.startswith(f"the unfinished backfill plan {stored.id} stored on {topic} ")
    assert message.endswith(f"delete the topic {topic} to plan the backfill afresh")
    return message


def test_the_computations_own_plan_as_its_topics_are_is_finished():
    refuse_foreign(plan(), spec(), ENDS.get)
    with_ids = plan(ids_end={0: 4, 1: 0})
    refuse_foreign(with_ids, spec(dedup=Dedup()), ENDS.get)


def test_a_plan_naming_another_topic_with_a_million_tasks_is_refused():
    forged = plan(ranges=(Range("billing", 0, 0, 10, "in", False),), tasks=1_000_000)
    assert "reads topic 'billing', which is none of ['in', 'p.count.in.by-key']" in refused(forged)


def test_another_computations_plan_is_refused():
    assert "is computation 'other''s" in refused(plan(computation="other"))


def test_a_range_read_as_another_input_or_keyed_otherwise_is_refused():
    ranges = list(plan().ranges)
    ranges[0] = replace(ranges[0], keyed=True)
    assert "reads 'in' as keyed input 'in'" in refused(plan(ranges=tuple(ranges)))


@pytest.mark.parametrize(
    "ends, ranges, message",
    [
        ({**ENDS, "in": [90, 40, 7, 0]}, None, "reads partitions [0, 1, 2] of 'in', which has 4 "),
        (ENDS, lambda r: r[1:], "reads partitions [1, 2] of 'in', which has 3 "),
        (ENDS, lambda r: (*r, r[0]), "reads partitions [0, 0, 1, 2] of 'in'"),
        ({k: v for k, v in ENDS.items() if k != "in"}, None, "of 'in', which does not exist"),
    ],
)
def test_a_plan_for_other_partition_counts_is_refused(ends, ranges, message):
    stored = plan() if ranges is None else plan(ranges=ranges(plan().ranges))
    assert message in refused(stored, ends)


def test_offsets_past_a_partitions_end_are_refused():
    assert "reads in/1 to offset 40, past its end" in refused(plan(), {**ENDS, "in": [90, 39, 7]})
    ends = {**ENDS, "p.count.changelog": [9, 0]}
    assert "has changelog_end past the end of 'p.count.changelog'" in refused(plan(), ends)


def test_journals_of_another_key_space_are_refused():
    assert "has changelog_end of partitions [0, 1, 2]" in refused(
        plan(changelog_end={0: 10, 1: 0, 2: 0})
    )
    assert "has start_watermarks of partitions [0]" in refused(plan(start_watermarks={0: 0}))
    assert "has ids_end of partitions [0, 1]" in refused(plan(ids_end={0: 4, 1: 0}))
    assert "has ids_end of partitions []" in refused(plan(), dedup=Dedup())


def test_more_tasks_than_rows_to_give_them_is_refused():
    stored = plan()
    assert stored.most_tasks() == 85 + 40 + 3 + 10 + 2
    refuse_foreign(replace(stored, tasks=140), spec(), ENDS.get)
    assert "splits into 141 tasks, more than its 140 rows" in refused(replace(stored, tasks=141))
