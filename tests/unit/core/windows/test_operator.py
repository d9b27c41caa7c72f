"""What the windowed operator does at the edges its reference tests (test_windowed.py) seldom
draw: sessions that only touch stay apart, `emit="update"` of sessions as they merge, a key's
open windows as a query answers them, and the watermark a late record is late by."""

from __future__ import annotations

from framework.core.pipeline import Pipeline
from framework.core.windows import Count, Hopping, Session
from framework.core.windows.operator import Windowed
from framework.errors import LateRecord
from framework.testing import Harness


def harness(window, emit="final", on_late="drop") -> Harness:
    pipeline = Pipeline("p")
    pipeline.source("in")
    pipeline.windowed(
        "w",
        inputs={"in": None},
        window=window,
        aggregate=Count(),
        output="out",
        emit=emit,
        on_late=on_late,
    )
    return Harness(pipeline, "w")


def test_sessions_that_only_touch_stay_apart():
    h = harness(Session(gap_ms=10))
    h.send("in", "k", {}, 0)  # [0, 10)
    h.send("in", "k", {}, 10)  # [10, 20): starts where the first ends
    h.send("in", "k", {}, 30)  # [30, 40)
    h.send("in", "k", {}, 20)  # [20, 30): ends where the last starts, starts where [10, 20) ends
    assert h.state("k") == {"0": [10, 1], "10": [20, 1], "20": [30, 1], "30": [40, 1]}
    h.send("in", "k", {}, 19)  # [19, 29): overlaps [10, 20) and [20, 30), not [30, 40)
    assert h.state("k") == {"0": [10, 1], "10": [30, 3], "30": [40, 1]}


def test_sessions_emitted_as_updates_give_each_merge_its_whole_session():
    h = harness(Session(gap_ms=10), emit="update")
    for ts in (0, 15, 8):  # [0, 10), [15, 25), then [8, 18) bridges them
        h.send("in", "k", {}, ts)
    assert [(r.value["start"], r.value["end"], r.value["value"]) for r in h.outputs("out")] == [
        (0, 10, 1),
        (15, 25, 1),
        (0, 25, 3),
    ]
    assert [r.timestamp for r in h.outputs("out")] == [9, 24, 24]
    h.advance_watermark(25)
    assert len(h.outputs("out")) == 3  # closing adds nothing to the updates
    assert h.state("k") == {} and h.timers("k") == []


def test_a_query_answers_open_sessions_oldest_first_with_their_own_ends():
    h = harness(Session(gap_ms=10))
    for ts in (100, 3, 5):
        h.send("in", "k", {}, ts)
    answer = Windowed(Session(gap_ms=10), Count(), "out", "final").queried_state(h.state("k"))
    assert answer == [
        {"start": 3, "end": 15, "value": 2},
        {"start": 100, "end": 110, "value": 1},
    ]


def test_a_query_answers_open_hopping_windows_oldest_first():
    window = Hopping(size_ms=10, every_ms=5)
    h = harness(window)
    h.send("in", "k", {}, 107)  # [100, 110) and [105, 115)
    h.send("in", "k", {}, 12)  # [5, 15) and [10, 20)
    answer = Windowed(window, Count(), "out", "final").queried_state(h.state("k"))
    assert [(w["start"], w["end"], w["value"]) for w in answer] == [
        (5, 15, 1),
        (10, 20, 1),
        (100, 110, 1),
        (105, 115, 1),
    ]


def test_a_record_late_for_several_windows_is_late_by_the_watermark_that_closed_the_last():
    h = harness(Hopping(size_ms=10, every_ms=5, grace_ms=2), on_late="dead_letter")
    h.advance_watermark(17)  # [0, 10) closed at 12, [5, 15) at 17
    h.send("in", "k", {}, 7)
    [late] = h.dead_letter_details()
    assert isinstance(late.error, LateRecord) and late.error.closes == 17


def test_a_late_session_record_is_late_by_its_sessions_close():
    h = harness(Session(gap_ms=10, grace_ms=2), on_late="dead_letter")
    h.advance_watermark(30)
    h.send("in", "k", {}, 18)  # [18, 28) closes at 30
    [late] = h.dead_letter_details()
    assert late.error.closes == 30
