"""Properties of event-time windowing on the executor, for any out-of-order input interleaved
with any watermark advances (and restarts): the MillWheel guarantees a windowed count needs."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.api import MIN_TIME, Computation
from framework.core.pipeline import Pipeline, key_by
from framework.testing import Harness

WINDOW = 1000
FOREVER = 2**62


class WindowCounter(Computation):
    """Counts records per key per 1-second bucket; a timer at the bucket's end emits the count
    and clears the bucket."""

    def __init__(self) -> None:
        self.fired: list[tuple[str, int]] = []

    def process_record(self, ctx, record):
        start = record.timestamp - record.timestamp % WINDOW
        counts = ctx.state.setdefault("counts", {})
        counts[str(start)] = counts.get(str(start), 0) + 1
        ctx.set_timer(str(start), start + WINDOW)

    def process_timer(self, ctx, timer):
        self.fired.append((ctx.key, timer.time))
        start = timer.time - WINDOW
        counts = ctx.state["counts"]
        count = counts.pop(str(start))
        if not counts:
            ctx.state.clear()
        ctx.produce(
            "counts",
            {"key": ctx.key, "window_start": start, "count": count, "w": ctx.low_watermark},
            timestamp=timer.time - 1,
        )


PIPELINE = (
    Pipeline("props")
    .source("events")
    .computation(
        "window-counter", WindowCounter, inputs={"events": key_by("k")}, outputs={"counts": None}
    )
)

# Times anywhere, and times on the edges of windows, where off-by-one bugs live.
times = st.one_of(
    st.integers(-500, 11_000),
    st.builds(
        lambda window, offset: window * WINDOW + offset,
        st.integers(0, 10),
        st.sampled_from([-1, 0, 1, WINDOW - 1]),
    ),
)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from("abc"), times),
        st.tuples(st.just("advance"), st.just(""), times),
        st.tuples(st.just("restart"), st.just(""), st.just(0)),
    ),
    max_size=80,
)


@settings(deadline=None, max_examples=200)
@given(operations)
def test_window_counts_for_any_order_and_any_watermarks(ops):
    h = Harness(PIPELINE, "window-counter")
    watermark = MIN_TIME
    expected: Counter[tuple[str, int]] = Counter()
    late = 0
    seen = 0
    for op, key, value in ops:
        published = h.output_watermark()  # what downstream may have been told so far
        if op == "send":
            if value < watermark:
                late += 1  # behind the watermark at arrival: dropped and counted
            else:
                expected[(key, value - value % WINDOW)] += 1
            h.send("events", "ignored", {"k": key}, value)
        elif op == "advance":
            watermark = max(watermark, value)
            h.advance_watermark(value)
        else:
            h.restart()
        assert h.watermark == watermark
        new = h.outputs("counts")[seen:]
        seen += len(new)
        for record in new:
            window_end = record.value["window_start"] + WINDOW
            # (c) no window is emitted before the watermark passes its end
            assert record.value["w"] >= window_end
            assert h.watermark >= window_end
            # ...and its timestamp is not late for downstream
            assert record.timestamp >= published
        assert h.late_records == late

    h.advance_watermark(FOREVER)
    outputs = h.outputs("counts")
    emitted = [(r.value["key"], r.value["window_start"]) for r in outputs]
    # (d) every non-late record is counted exactly once, in exactly one emission per window
    assert len(emitted) == len(set(emitted))
    assert {(r.value["key"], r.value["window_start"]): r.value["count"] for r in outputs} == dict(
        expected
    )
    # (a) the late ones are exactly the ones behind the watermark
    assert h.late_records == late
    assert sum(expected.values()) + late == sum(op == "send" for op, _, _ in ops)
    # (b) timers fire per key in increasing time
    fired = h.executor.computation.fired  # since the last restart
    for key in "abc":
        times = [t for k, t in fired if k == key]
        assert times == sorted(times) and len(times) == len(set(times))
    per_key = {}
    for r in outputs:
        per_key.setdefault(r.key, []).append(r.value["window_start"])
    assert all(starts == sorted(starts) for starts in per_key.values())
    # nothing is left behind
    assert h.timers() == []
    assert all(h.state(k) == {} for k in "abc")
    assert h.dead_letters() == []
