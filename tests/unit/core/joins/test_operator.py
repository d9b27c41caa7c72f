"""What the join operator does at the edges its reference tests (test_join.py, compared as
multisets) do not look at: records of equal times kept and met in arrival order, the matched
flag answered as a boolean, and the watermark a late record is late by."""

from __future__ import annotations

import json

from framework.core.joins.operator import Joined
from framework.errors import LateRecord
from tests.unit.core.joins.test_join import harness


def test_records_of_one_time_are_held_and_met_in_the_order_they_came():
    h = harness(how="left")
    for n in (1, 2, 3):
        h.send("orders", "k", {"n": n}, 100)
    h.send("orders", "k", {"n": 0}, 99)
    assert [e[2]["n"] for e in h.state("k")["l"]] == [0, 1, 2, 3]
    h.send("payments", "k", {"p": 1}, 105)
    assert [r.value["left"]["n"] for r in h.outputs("out")] == [0, 1, 2, 3]


def test_unmatched_records_of_one_time_come_out_in_the_order_they_came():
    h = harness(how="left")
    for n in (1, 2, 3):
        h.send("orders", "k", {"n": n}, 100)
    h.advance_watermark(111)
    assert [r.value["left"]["n"] for r in h.outputs("out")] == [1, 2, 3]


def test_a_query_answers_matched_as_a_boolean():
    h = harness(how="outer")
    h.send("orders", "k", {"n": 1}, 10)
    h.send("orders", "k", {"n": 2}, 30)
    h.send("payments", "k", {"n": 3}, 12)
    answer = Joined("orders", "payments", 0, 10, 0, "outer", "out").queried_state(h.state("k"))
    assert answer == {
        "left": [
            {"timestamp": 10, "matched": True, "value": {"n": 1}},
            {"timestamp": 30, "matched": False, "value": {"n": 2}},
        ],
        "right": [{"timestamp": 12, "matched": True, "value": {"n": 3}}],
    }
    shown = json.dumps(answer)  # as the query server answers it
    assert (shown.count('"matched": true'), shown.count('"matched": false')) == (2, 1)


def test_a_late_record_is_late_by_the_first_watermark_past_its_window():
    h = harness(before=3, after=10, grace=2)
    h.advance_watermark(200)
    h.send("orders", "k", {"n": 1}, 187)  # its window closes past 187 + 10 + 2
    h.send("payments", "k", {"n": 2}, 194)  # past 194 + 3 + 2
    closes = [d.error.closes for d in h.dead_letter_details()]
    assert all(isinstance(d.error, LateRecord) for d in h.dead_letter_details())
    assert closes == [200, 200]
    h.send("orders", "k", {"n": 3}, 188)  # closes at 201: on time
    assert len(h.dead_letter_details()) == 2
