"""Interval joins on the executor (through the Harness), against a brute-force reference
computed from the whole input: any out-of-order input, any watermark advances and restarts
give every pair once, every unmatched record once and only when nothing matched it and only
once its window closed, edges inclusive; late records are exactly the reference's; nothing is
left once every window closed; no result is ever late downstream."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from framework.core.api import MIN_TIME, Record
from framework.core.joins.operator import Joined
from framework.core.pipeline import Pipeline, PipelineError
from framework.testing import Harness

FOREVER = 2**62


def harness(before=0, after=10, grace=0, how="inner", on_late="dead_letter") -> Harness:
    pipeline = Pipeline("p")
    pipeline.source("orders")
    pipeline.source("payments")
    pipeline.join(
        "j",
        left="orders",
        right="payments",
        inputs={"orders": None, "payments": None},
        before_ms=before,
        after_ms=after,
        grace_ms=grace,
        how=how,
        output="out",
        on_late=on_late,
    )
    return Harness(pipeline, "j")


SIDES = {"l": "orders", "r": "payments"}


def run(h: Harness, events: list[tuple], reach: dict[str, int]) -> list:
    """Feed `events` (record n is the n-th record event), then close everything; checks on the
    way that no result is behind the output watermark published before it, and that a record
    is produced alone only once the watermark has passed its window."""
    published, n = MIN_TIME, 0
    for event in events + [("wm", FOREVER)]:
        before = len(h.outputs("out"))
        if event[0] == "wm":
            h.advance_watermark(event[1])
        elif event[0] == "restart":
            h.restart()
        else:
            side, key, ts = event
            h.send(SIDES[side], key, {"n": n}, ts)
            n += 1
        for result in h.outputs("out")[before:]:
            assert result.timestamp >= published, (result, published)
            v = result.value
            if v["left"] is None or v["right"] is None:
                side = "l" if v["right"] is None else "r"
                assert h.watermark >= result.timestamp + reach[side], (result, h.watermark)
        assert h.output_watermark() <= max(h.watermark, MIN_TIME)
        published = max(published, h.output_watermark())
    return h.outputs("out")


def reference(events, before, after, grace, how):
    """What the join must produce: a record is late when its window had closed (W >= its time +
    reach) on arrival; two records on time meet when their times match and the earlier one's
    window was still open when the later came; a record that met none is produced alone."""
    reach = {"l": after + grace + 1, "r": before + grace + 1}
    alone = {"l": how in ("left", "outer"), "r": how == "outer"}
    w, n, taken, late = MIN_TIME, 0, [], []
    for event in events:
        if event[0] == "wm":
            w = max(w, event[1])
        elif event[0] in reach:
            side, key, ts = event
            (late if ts + reach[side] <= w else taken).append((side, key, ts, n, w))
            n += 1
    results, matched = Counter(), set()
    for i, (side, key, ts, n, w) in enumerate(taken):
        for j, (side2, key2, ts2, n2, _) in enumerate(taken[:i]):
            if side2 == side or key2 != key or ts2 + reach[side2] <= w:
                continue
            (tl, nl), (tr, nr) = ((ts, n), (ts2, n2)) if side == "l" else ((ts2, n2), (ts, n))
            if tl - before <= tr <= tl + after:
                results[(key, nl, nr, max(tl, tr))] += 1
                matched |= {i, j}
    for i, (side, key, ts, n, _) in enumerate(taken):
        if i not in matched and alone[side]:
            results[(key, n, None, ts) if side == "l" else (key, None, n, ts)] += 1
    return results, sorted(n for _, _, _, n, _ in late), reach


def as_counter(outputs) -> Counter:
    def n(v):
        return None if v is None else v["n"]

    return Counter((r.key, n(r.value["left"]), n(r.value["right"]), r.timestamp) for r in outputs)


record = st.tuples(st.sampled_from("lr"), st.sampled_from("ab"), st.integers(0, 12))
event = st.one_of(  # mostly records: pairs on the edges need several of one key
    record,
    record,
    record,
    st.tuples(st.just("wm"), st.integers(0, 16)),
    st.tuples(st.just("restart")),
)


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(event, min_size=6, max_size=40),
    before=st.integers(-3, 6),
    after=st.integers(-3, 6),
    grace=st.integers(0, 3),
)
def test_a_join_gives_the_references_pairs_and_unmatched_records_once_each(
    how, events, before, after, grace
):
    assume(before + after >= 0)
    h = harness(before, after, grace, how)
    expected, late, reach = reference(events, before, after, grace, how)
    outputs = run(h, events, reach)
    assert as_counter(outputs) == expected
    assert h.late_records == len(late)
    assert sorted(d.record.value["n"] for d in h.dead_letter_details()) == late
    assert {d.stage for d in h.dead_letter_details()} <= {"late"}
    assert h.state("a") == h.state("b") == {} and h.timers() == []


def test_the_contract_example_pairs_once_and_a_left_record_alone_after_its_window():
    h = harness(before=0, after=3_600_000, how="left")
    h.send("orders", "o1", {"id": 1}, 1_000)
    h.send("payments", "o1", {"paid": 5}, 1_000 + 3_600_000)  # the far edge is inclusive
    h.send("orders", "o2", {"id": 2}, 2_000)
    h.send("payments", "o2", {"paid": 7}, 1_999)  # before the order, before_ms=0: no match
    [pair] = h.outputs("out")
    assert pair.key == "o1" and pair.timestamp == 3_601_000
    assert pair.value == {"key": "o1", "left": {"id": 1}, "right": {"paid": 5}}
    h.advance_watermark(3_602_000)  # o2's window: 2_000 + 3_600_000, passed only past it
    assert len(h.outputs("out")) == 1
    h.advance_watermark(3_602_001)
    alone = h.outputs("out")[1]
    assert (alone.key, alone.timestamp) == ("o2", 2_000)
    assert alone.value == {"key": "o2", "left": {"id": 2}, "right": None}
    assert h.state("o1") == h.state("o2") == {} and h.timers() == []


def test_a_record_that_matched_before_a_restart_is_never_produced_alone():
    h = harness(before=5, after=5, how="outer")
    h.send("orders", "k", {"n": 1}, 10)
    h.send("payments", "k", {"n": 2}, 14)
    h.restart()
    h.advance_watermark(FOREVER)
    assert [(r.value["left"], r.value["right"]) for r in h.outputs("out")] == [({"n": 1}, {"n": 2})]


def test_a_record_behind_the_watermark_within_its_window_joins_and_one_past_it_is_late():
    h = harness(before=0, after=10, grace=2)
    h.send("payments", "k", {"n": 1}, 20)  # its window: orders in [10, 20], open until W > 22
    h.advance_watermark(18)
    h.send("orders", "k", {"n": 2}, 12)  # 6 behind the watermark; its window is open to 24
    assert len(h.outputs("out")) == 1 and h.late_records == 0
    h.advance_watermark(25)
    h.send("orders", "k", {"n": 3}, 12)
    assert h.late_records == 1
    [(record, reason)] = h.dead_letters()
    assert record.value == {"n": 3} and "raise grace_ms" in reason
    assert h.dead_letter_details()[0].stage == "late"


def test_the_output_watermark_is_held_below_the_oldest_open_record():
    h = harness(before=3, after=10, grace=2, how="outer")
    h.send("orders", "k", {"n": 1}, 100)
    h.advance_watermark(105)
    assert h.output_watermark() <= 100  # the order may still come out alone, stamped 100
    h.advance_watermark(113)  # 100 + 10 + 2 + 1: it does
    assert h.outputs("out")[0].timestamp == 100
    assert h.output_watermark() <= 113 - 10


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"before_ms": 5, "after_ms": -6}, "before_ms \\+ after_ms >= 0"),
        ({"left": "clicks"}, "left='clicks' is not among inputs"),
        ({"right": "clicks"}, "right='clicks' is not among inputs"),
        ({"right": "orders"}, "join two different streams"),
        ({"how": "full"}, "how='full'; use one of"),
        ({"on_late": "keep"}, "on_late='keep'; use one of"),
        ({"grace_ms": -1}, "grace_ms >= 0"),
        ({"after_ms": 1.5}, "after_ms=1.5; give whole milliseconds"),
        ({"inputs": {"orders": None, "payments": None, "x": None}}, "exactly its left and right"),
        ({"guarantee": "maybe"}, "guarantee='maybe'; use one of"),
    ],
)
def test_a_bad_join_declaration_is_refused_naming_the_fix(change, names):
    pipeline = Pipeline("p")
    args = {
        "left": "orders",
        "right": "payments",
        "inputs": {"orders": None, "payments": None},
        "before_ms": 0,
        "after_ms": 10,
        "output": "out",
        **change,
    }
    with pytest.raises(PipelineError, match=names):
        pipeline.join("j", **args)
    assert "j" not in pipeline.computations


@pytest.mark.parametrize("option", ["outputs", "formats", "state_schema", "tables"])
def test_a_join_declares_only_what_a_join_has(option):
    """Its signature is explicit: what makes no sense for a join (it writes one stream, runs no
    hook of the user's, keeps its open records as JSON) is no keyword of it."""
    pipeline = Pipeline("p")
    args = {"left": "orders", "right": "payments", "inputs": {"orders": None, "payments": None},
            "before_ms": 0, "after_ms": 10, "output": "out"}  # fmt: skip
    with pytest.raises(TypeError, match=option):
        pipeline.join("j", **args, **{option: {}})
    assert "j" not in pipeline.computations


def test_a_record_of_neither_side_is_dead_lettered_not_taken_for_the_right_one():
    h = harness(how="outer")
    record = Record("k", {"n": 1}, 5, "elsewhere", "id-1")
    h.executor.process(record)
    h.advance_watermark(FOREVER)
    assert h.outputs("out") == []
    assert [d.stage for d in h.dead_letter_details()] == ["process_record"]


def test_a_query_answers_each_sides_open_records_oldest_first():
    h = harness(before=5, after=5, how="outer")
    h.send("orders", "k", {"n": 1}, 10)
    h.send("payments", "k", {"n": 2}, 14)
    h.send("orders", "k", {"n": 3}, 2)
    joined = Joined("orders", "payments", 5, 5, 0, "outer", "out")
    assert joined.queried_state(h.state("k")) == {
        "left": [
            {"timestamp": 2, "matched": False, "value": {"n": 3}},
            {"timestamp": 10, "matched": True, "value": {"n": 1}},
        ],
        "right": [{"timestamp": 14, "matched": True, "value": {"n": 2}}],
    }
