"""Windowed computations on the executor (through the Harness), against a brute-force reference
computed from the whole input: any out-of-order input, any watermark advances, any grace and
restarts give exactly the reference's windows, each once; late records are exactly those with
no open window; nothing is left behind; no result is ever late downstream."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.api import MIN_TIME
from framework.core.pipeline import Pipeline, PipelineError
from framework.core.windows import (
    Collect,
    Count,
    Hopping,
    Max,
    Mean,
    Min,
    Reduce,
    Session,
    Sum,
    Tumbling,
)
from framework.testing import Harness

FOREVER = 2**62
AGGREGATES = {
    "count": (Count(), len),
    "sum": (Sum("n"), sum),
    "min": (Min("n"), min),
    "max": (Max("n"), max),
    "mean": (Mean("n"), lambda xs: sum(xs) / len(xs)),
    "collect": (Collect("n"), sorted),  # arrival order differs once sessions merge
}


def harness(window, aggregate, emit="final", on_late="drop") -> Harness:
    pipeline = Pipeline("p")
    pipeline.source("in")
    pipeline.windowed(
        "w",
        inputs={"in": None},
        window=window,
        aggregate=aggregate,
        output="out",
        emit=emit,
        on_late=on_late,
    )
    return Harness(pipeline, "w")


def run(h: Harness, events: list[tuple]) -> list:
    """Feed `events`, then close everything; checks on the way that no result is behind the
    output watermark published before it (it would be late downstream)."""
    published = MIN_TIME
    for event in events + [("wm", FOREVER)]:
        before = len(h.outputs("out"))
        if event[0] == "wm":
            h.advance_watermark(event[1])
        elif event[0] == "restart":
            h.restart()
        else:
            _, key, ts, n = event
            h.send("in", key, {"n": n}, ts)
        for result in h.outputs("out")[before:]:
            assert result.timestamp >= published, (result, published)
            assert result.timestamp == result.value["end"] - 1
        assert h.output_watermark() <= max(h.watermark, MIN_TIME)
        published = max(published, h.output_watermark())
    return h.outputs("out")


def reference_fixed(window, events, fold):
    """Per window, the records that arrived while it was open (W < end + grace)."""
    w, windows, late = MIN_TIME, defaultdict(list), 0
    for event in events:
        if event[0] == "wm":
            w = max(w, event[1])
        elif event[0] == "rec":
            _, key, ts, n = event
            starts = [
                s
                for s in range(ts - window.size_ms - window.every_ms, ts + 1)
                if s % window.every_ms == 0 and s <= ts < s + window.size_ms
            ]
            open_ = [s for s in starts if s + window.size_ms + window.grace_ms > w]
            for s in open_:
                windows[(key, s, s + window.size_ms)].append(n)
            late += not open_
    return Counter((k, s, e, repr(fold(xs))) for (k, s, e), xs in windows.items()), late


def components(records, gap):
    """Sessions of `records` ((ts, n) pairs): connected runs of overlapping [ts, ts + gap)."""
    sessions = []
    for ts, n in sorted(records):
        if sessions and ts < sessions[-1][1]:
            sessions[-1][1] = max(sessions[-1][1], ts + gap)
            sessions[-1][2].append((ts, n))
        else:
            sessions.append([ts, ts + gap, [(ts, n)]])
    return sessions


def reference_sessions(window, events, fold):
    """Sessions recomputed from the open records at every step: a record is taken when the
    session it would join ends after W - grace; a session closes once W reaches end + grace."""
    w, open_, results, late = MIN_TIME, defaultdict(list), Counter(), 0
    gap, grace = window.gap_ms, window.grace_ms
    for event in events + [("wm", FOREVER)]:
        if event[0] == "wm":
            w = max(w, event[1])
            for key, records in open_.items():
                keep = []
                for start, end, members in components(records, gap):
                    if end + grace <= w:
                        results[(key, start, end, repr(fold([n for _, n in members])))] += 1
                    else:
                        keep += members
                open_[key] = keep
        elif event[0] == "rec":
            _, key, ts, n = event
            joined = [c for c in components(open_[key] + [(ts, n)], gap) if (ts, n) in c[2]]
            if joined[0][1] + grace > w:
                open_[key].append((ts, n))
            else:
                late += 1
    return results, late


def as_counter(outputs, fold_name):
    results = Counter()
    for record in outputs:
        v = record.value
        value = sorted(v["value"]) if fold_name == "collect" else v["value"]
        results[(v["key"], v["start"], v["end"], repr(value))] += 1
    return results


event = st.one_of(
    st.tuples(st.just("rec"), st.sampled_from("ab"), st.integers(0, 120), st.integers(-9, 9)),
    st.tuples(st.just("wm"), st.integers(0, 140)),
    st.tuples(st.just("restart")),
)
events = st.lists(event, max_size=40)


@pytest.mark.parametrize("fold_name", sorted(AGGREGATES))
@settings(max_examples=60, deadline=None)
@given(
    events=events,
    size=st.integers(1, 30),
    every=st.integers(1, 30),
    grace=st.integers(0, 20),
)
def test_fixed_windows_give_the_reference_windows_once_each(fold_name, events, size, every, grace):
    window = Hopping(size_ms=max(size, every), every_ms=every, grace_ms=grace)
    aggregate, fold = AGGREGATES[fold_name]
    h = harness(window, aggregate, on_late="dead_letter")
    outputs = run(h, events)
    expected, late = reference_fixed(window, events, fold)
    assert as_counter(outputs, fold_name) == expected
    assert h.late_records == late
    assert [stage for _, stage in _stages(h)] == ["late"] * late
    assert h.state("a") == h.state("b") == {} and h.timers() == []


@pytest.mark.parametrize("fold_name", sorted(AGGREGATES))
@settings(max_examples=60, deadline=None)
@given(events=events, gap=st.integers(1, 25), grace=st.integers(0, 20))
def test_sessions_give_the_reference_sessions_once_each(fold_name, events, gap, grace):
    window = Session(gap_ms=gap, grace_ms=grace)
    aggregate, fold = AGGREGATES[fold_name]
    h = harness(window, aggregate)
    outputs = run(h, events)
    expected, late = reference_sessions(window, events, fold)
    assert as_counter(outputs, fold_name) == expected
    assert h.late_records == late
    assert h.dead_letters() == []  # on_late="drop"
    assert h.state("a") == h.state("b") == {} and h.timers() == []


@settings(max_examples=60, deadline=None)
@given(events=events, size=st.integers(1, 30), grace=st.integers(0, 20))
def test_emit_update_gives_every_change_and_its_last_value_is_the_final_one(events, size, grace):
    window = Tumbling(size_ms=size, grace_ms=grace)
    updates = run(harness(window, Count(), emit="update"), events)
    finals = run(harness(window, Count()), events)
    last = {(r.value["key"], r.value["start"]): r.value for r in updates}
    assert sorted(map(repr, last.values())) == sorted(repr(r.value) for r in finals)
    taken = sum(r.value["value"] for r in finals)
    assert len(updates) == taken  # one update per record a window took, nothing at close


def _stages(h: Harness):
    return [(d.record, d.stage) for d in h.dead_letter_details()]


def test_a_record_bridging_two_sessions_merges_them_into_one_result():
    h = harness(Session(gap_ms=10), Collect("n"))
    for ts, n in [(0, 1), (25, 2), (12, 3)]:  # [0, 10), [25, 35), [12, 22): apart
        h.send("in", "k", {"n": n}, ts)
    assert sorted(h.state("k")) == ["0", "12", "25"]
    h.send("in", "k", {"n": 4}, 8)  # [8, 18) bridges [0, 10) and [12, 22)
    h.send("in", "k", {"n": 5}, 20)  # [20, 30) bridges [0, 22) and [25, 35)
    assert h.state("k") == {"0": [35, [1, 3, 4, 2, 5]]}
    assert [t.tag for _, t in h.timers("k")] == ["0"]
    h.advance_watermark(34)
    assert h.outputs("out") == []
    h.advance_watermark(35)
    [result] = h.outputs("out")
    assert result.value == {"key": "k", "start": 0, "end": 35, "value": [1, 3, 4, 2, 5]}
    assert result.timestamp == 34


def test_a_record_within_grace_is_on_time_and_one_after_it_is_late():
    h = harness(Tumbling(size_ms=10, grace_ms=5), Count(), on_late="dead_letter")
    h.send("in", "k", {}, 3)
    h.advance_watermark(14)
    h.send("in", "k", {}, 9)  # behind the watermark, but [0, 10) is open until 15
    assert h.late_records == 0 and h.state("k") == {"0": 2}
    h.advance_watermark(15)
    h.send("in", "k", {}, 9)
    assert h.late_records == 1
    [(record, stage)] = _stages(h)
    assert (record.timestamp, stage) == (9, "late")
    assert "raise grace_ms" in h.dead_letters()[0][1]
    assert [r.value["value"] for r in h.outputs("out")] == [2]


def test_a_closed_key_leaves_nothing_behind():
    h = harness(Hopping(size_ms=10, every_ms=5), Sum("n"))
    h.send("in", "k", {"n": 2}, 7)
    assert sorted(h.state("k")) == ["0", "5"]
    h.advance_watermark(15)
    assert h.state("k") == {} and h.timers("k") == []
    assert h.executor.state.peek("k") in (None, {})


def test_a_value_an_aggregator_refuses_is_dead_lettered_and_the_window_stays():
    h = harness(Tumbling(size_ms=10), Sum("n"))
    h.send("in", "k", {"n": 1}, 1)
    h.send("in", "k", {"n": "two"}, 2)
    assert h.state("k") == {"0": 1}
    assert [stage for _, stage in _stages(h)] == ["aggregate"]


def test_a_session_window_without_merge_is_refused_at_start_naming_the_fix():
    with pytest.raises(PipelineError, match=r"merge=\.\.\."):
        harness(Session(gap_ms=10), Reduce(0, lambda acc, v: acc + 1))


@pytest.mark.parametrize(
    "change",
    [
        {"window": 60_000},
        {"aggregate": len},
        {"emit": "always"},
        {"on_late": "ignore"},
    ],
)
def test_a_windowed_declaration_that_cannot_run_fails_naming_the_fix(change):
    arguments = {"window": Tumbling(10), "aggregate": Count(), "emit": "final", "on_late": "drop"}
    arguments.update(change)
    with pytest.raises(PipelineError, match="use"):
        harness(**arguments)


def test_the_output_watermark_holds_an_open_windows_result_on_time():
    h = harness(Tumbling(size_ms=10, grace_ms=5), Max("n"))
    h.send("in", "k", {"n": 1}, 4)
    h.advance_watermark(14)  # [0, 10) open until 15: its result (timestamp 9) must not be late
    assert h.output_watermark() == 9
    h.send("in", "k", {"n": 1}, 12)
    h.advance_watermark(15)
    assert h.outputs("out")[0].timestamp == 9
    assert h.output_watermark() <= 19


@pytest.mark.parametrize("window", [Tumbling(size_ms=10, grace_ms=5), Session(10, grace_ms=5)])
def test_a_window_closes_exactly_when_the_watermark_reaches_end_plus_grace(window):
    h = harness(window, Count())
    h.advance_watermark(15)
    session = isinstance(window, Session)
    h.send("in", "k", {}, 0 if session else 9)  # its window would close at 15
    assert h.late_records == 1 and h.state("k") == {}
    h.send("in", "k", {}, 1 if session else 10)  # open until 16 / 25
    assert h.late_records == 1 and h.state("k") != {}
