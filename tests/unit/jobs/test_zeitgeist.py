"""Zeitgeist's computations, alone and chained through Harnesses over generated traffic:
exactly the planted spike and dip are reported, and nothing else."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.pipeline import Pipeline
from framework.testing import Harness
from jobs.zeitgeist import pipeline as zeitgeist
from jobs.zeitgeist.computations import ModelCalculator, normalize
from jobs.zeitgeist.generator import (
    MAX_DELAY_MS,
    PLANTED,
    QUERIES,
    first_window,
    generate,
    planted,
)

START = 1_700_000_000_000  # a whole second
SECONDS = 120
FOREVER = 2**62


def with_model(model: type[ModelCalculator]) -> Pipeline:
    """The job's pipeline with another model class (e.g. a shorter memory)."""
    return zeitgeist.redeclared(replace(zeitgeist["model"], factory=model))


@dataclass
class Run:
    """The job's four computations chained as on Kafka: each one's outputs, then its output
    watermark, feed the next; the source's watermark is BoundedOutOfOrderness(MAX_DELAY_MS)."""

    pipeline: Pipeline = field(default_factory=lambda: zeitgeist)
    stages: dict[str, Harness] = field(init=False)
    edges: tuple[tuple[str, str, tuple[str, ...]], ...] = (
        ("window-counter", "window-counts", ("model",)),
        ("model", "models", ("spike-detector", "dip-detector")),
    )
    sent: Counter = field(default_factory=Counter)  # (query, window_start) -> count, not late
    late: int = 0

    def __post_init__(self) -> None:
        self.stages = {name: Harness(self.pipeline, name) for name in self.pipeline.computations}
        self._cursor: dict[str, int] = defaultdict(int)

    def feed(self, records, end_ms: int) -> None:
        counter = self.stages["window-counter"]
        high = None
        for key, value, ts in records:
            start = ts - ts % 1000
            if start + 1000 <= counter.watermark:
                self.late += 1  # its window has closed (grace_ms is 0)
            else:
                self.sent[(normalize(value["query"]), start)] += 1
            counter.send("queries", key, value, ts)
            high = ts if high is None else max(high, ts)
            counter.advance_watermark(high - MAX_DELAY_MS)
            self._pump()
        counter.advance_watermark(end_ms)  # the data ends: every window before it is complete
        self._pump()

    def _pump(self) -> None:
        for upstream, stream, downstreams in self.edges:
            up = self.stages[upstream]
            new = up.outputs(stream)[self._cursor[stream] :]
            self._cursor[stream] += len(new)
            for name in downstreams:
                down = self.stages[name]
                for r in new:
                    down.send(stream, r.key, r.value, r.timestamp, record_id=r.id)
                down.advance_watermark(up.output_watermark())

    def outputs(self, stage: str, stream: str):
        return self.stages[stage].outputs(stream)

    def anomalies(self) -> list[tuple[str, str, int]]:
        return sorted(
            (r.value["query"], r.value["kind"], r.value["window_start"])
            for stage in ("spike-detector", "dip-detector")
            for r in self.outputs(stage, "anomalies")
        )


def run(seed: int, *, late_fraction: float = 0.0) -> Run:
    r = Run()
    r.feed(
        generate(START, SECONDS, seed, late_fraction=late_fraction),
        first_window(START) + SECONDS * 1000,
    )
    return r


def check_exactly_planted(r: Run) -> None:
    found = r.anomalies()
    expected = planted(START)
    for query, kind, window in found:
        assert any(q == query and k == kind and lo <= window <= hi for q, k, lo, hi in expected), (
            f"unplanted anomaly {(query, kind, window)}; all found: {found}"
        )
    for query, kind, lo, hi in expected:
        windows = [w for q, k, w in found if (q, k) == (query, kind)]
        # the planted interval is reported, most of its windows at least
        assert len(windows) * 2 > (hi - lo) // 1000 + 1, f"{query} {kind}: only {windows}"


def check_window_counts(r: Run) -> None:
    """Each window with searches exactly once, with its count, in window order per query."""
    last: dict[str, int] = {}
    got = {}
    for rec in r.outputs("window-counter", "window-counts"):
        v = rec.value
        assert rec.key == v["key"] and v["end"] == v["start"] + 1000
        assert rec.timestamp == v["end"] - 1
        assert v["start"] > last.get(v["key"], -FOREVER)
        last[v["key"]] = v["start"]
        got[(v["key"], v["start"])] = v["value"]
    assert got == {window: n for window, n in r.sent.items() if n}


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_exactly_the_planted_anomalies_are_reported(seed):
    r = run(seed)
    check_exactly_planted(r)
    for name, h in r.stages.items():
        assert h.late_records == 0, name  # window end - 1 is never late downstream
        assert h.dead_letters() == [], name


def test_window_counts_are_complete_and_the_models_dense_with_empty_windows_as_zeros():
    r = run(7)
    check_window_counts(r)
    models: dict[str, list[dict]] = defaultdict(list)
    for rec in r.outputs("model", "models"):
        assert rec.key == rec.value["query"]
        assert rec.timestamp == rec.value["window_start"] + 999
        models[rec.key].append(rec.value)
    end = first_window(START) + SECONDS * 1000
    assert set(models) == {q.text for q in QUERIES}
    for query, series in models.items():
        first = min(start for q, start in r.sent if q == query)
        # one model per window after the warm-up, consecutive up to the end of data, the
        # windows without searches included, with the count of searches each had
        starts = [m["window_start"] for m in series]
        assert starts == list(range(first + ModelCalculator.warmup * 1000, end, 1000)), query
        assert [m["count"] for m in series] == [r.sent[(query, s)] for s in starts], query
    # the rare query's empty windows and the planted dip's are in the models as zeros
    assert any(m["count"] == 0 for m in models["solar eclipse"])
    _, _, lo, hi = next(p for p in planted(START) if p[1] == "dip")
    dip = [m["count"] for m in models["weather"] if lo <= m["window_start"] <= hi]
    assert len(dip) == (hi - lo) // 1000 + 1 and 0 in dip


def test_late_stragglers_are_dropped_and_counted_without_false_anomalies():
    r = run(3, late_fraction=0.003)
    counter = r.stages["window-counter"]
    assert r.late > 0 and counter.late_records == r.late
    check_window_counts(r)
    check_exactly_planted(r)


def test_planted_anomalies_are_where_the_generator_says():
    assert [p[:2] for p in planted(START)] == [(p.query, p.kind) for p in PLANTED]
    assert planted(START + 1)[0][2] == planted(START)[0][2] + 1000  # aligned to whole seconds
    a = list(generate(START, 5, 42))
    assert a == list(generate(START, 5, 42)) and a != list(generate(START, 5, 43))
    # delivered out of order, but never more than MAX_DELAY_MS behind
    high = None
    for _, _, ts in a:
        high = ts if high is None else max(high, ts)
        assert ts > high - MAX_DELAY_MS
    assert any(t1 > t2 for (_, _, t1), (_, _, t2) in zip(a, a[1:], strict=False))


# -- the computations one by one ----------------------------------------------------------


def test_the_window_counter_produces_each_window_with_searches_once_it_closed():
    h = Harness(zeitgeist, "window-counter")
    h.send("queries", "u1", {"query": "Cats "}, 1500)
    h.send("queries", "u2", {"query": "cats"}, 500)  # out of order: an earlier window
    h.send("queries", "u3", {"query": "CATS"}, 3999)
    h.advance_watermark(1999)
    assert [r.value for r in h.outputs("window-counts")] == [
        {"key": "cats", "start": 0, "end": 1000, "value": 1}
    ]
    h.send("queries", "u4", {"query": "cats"}, 1000)  # behind the watermark, window open
    h.advance_watermark(100_000)
    got = [
        (r.key, r.value["start"], r.value["value"], r.timestamp) for r in h.outputs("window-counts")
    ]
    assert got == [
        ("cats", 0, 1, 999),
        ("cats", 1000, 2, 1999),
        ("cats", 3000, 1, 3999),  # [2000, 3000) had no search: no window
    ]
    h.send("queries", "u5", {"query": "cats"}, 2500)  # its window has closed: late
    assert h.late_records == 1 and len(h.outputs("window-counts")) == 3
    assert h.state("cats") == {} and h.timers() == []


class ShortMemory(ModelCalculator):
    warmup = 1
    idle_windows = 3


def send_window(h: Harness, start: int, count: int) -> None:
    """The window counter's result for `start`, as it produces it."""
    value = {"key": "q", "start": start, "end": start + 1000, "value": count}
    h.send("window-counts", "q", value, start + 999)


def test_the_model_counts_windows_it_did_not_get_as_empty_then_forgets_a_silent_query():
    h = Harness(with_model(ShortMemory), "model")

    def models() -> list[tuple[int, int]]:
        for r in h.outputs("models"):
            assert r.timestamp == r.value["window_start"] + 999
        return [(r.value["window_start"], r.value["count"]) for r in h.outputs("models")]

    send_window(h, 0, 4)
    send_window(h, 1000, 2)
    h.advance_watermark(2999)  # the window [2000, 3000) may still come
    assert models() == [(1000, 2)]
    h.advance_watermark(3000)  # it did not: it was empty
    assert models() == [(1000, 2), (2000, 0)]
    send_window(h, 4000, 5)  # before the watermark passed [3000, 4000): that one was empty too
    assert models()[2:] == [(3000, 0), (4000, 5)]
    h.advance_watermark(10_000)  # three empty windows in a row: forgotten
    assert models()[4:] == [(5000, 0), (6000, 0), (7000, 0)]
    assert h.timers() == [] and "idle" not in h.state("q")
    expected = h.state("q")["expected"]
    send_window(h, 20_000, 6)  # back: the twelve windows missed only decay the model
    assert models()[7:] == [(20_000, 6)]
    assert h.outputs("models")[-1].value["expected"] == pytest.approx(expected * 0.9**12)
    assert [(t.tag, t.time) for _, t in h.timers()] == [("empty", 22_000)]


@settings(deadline=None, max_examples=100)
@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=30).map(lambda c: [1, *c]),
    st.data(),
)
def test_the_model_is_the_same_whether_a_window_or_the_watermark_after_it_comes_first(counts, data):
    """Any delivery the watermark invariant allows — each window's result before the
    watermark passes its end — gives the models of the canonical one, where the watermark
    passes each window right after it; no model is behind an output watermark published
    before it."""

    def deliver(watermark) -> tuple[list, dict]:
        h = Harness(with_model(ShortMemory), "model")
        published, seen = h.output_watermark(), 0

        def check() -> None:
            nonlocal published, seen
            new = h.outputs("models")[seen:]
            assert all(r.timestamp >= published for r in new)
            published, seen = h.output_watermark(), seen + len(new)

        for i, count in enumerate(counts):
            h.advance_watermark(watermark(i))
            check()
            if count:
                send_window(h, i * 1000, count)
                check()
        h.advance_watermark(FOREVER)
        return [(r.value, r.timestamp) for r in h.outputs("models")], h.state("q")

    canonical = deliver(lambda i: i * 1000)
    # any watermark before window i's result comes: at most its last millisecond
    drawn = deliver(lambda i: data.draw(st.integers(0, i * 1000 + 999), label=f"wm {i}"))
    assert drawn == canonical


def test_model_calculator_warms_up_then_predicts_before_it_learns():
    h = Harness(zeitgeist, "model")
    for i in range(10):
        send_window(h, i * 1000, 10 + (i % 2) * 2)  # 10, 12, 10, ...: mean 11
    assert h.outputs("models") == []  # warming up
    assert h.state("q")["expected"] == pytest.approx(11.0)
    send_window(h, 10_000, 100)  # a spike: predicted 11, and the model moves only a little
    send_window(h, 10_000, 100)  # a replay of the same window is ignored
    send_window(h, 11_000, 11)
    models = [r.value for r in h.outputs("models")]
    assert models[0] == {"query": "q", "window_start": 10_000, "expected": 11.0, "count": 100}
    assert models[1]["expected"] == pytest.approx(11 + 0.1 * (23 - 11))  # clamped at 2x + 1
    assert len(models) == 2


@pytest.mark.parametrize(
    ("count", "expected", "spike", "dip"),
    [
        (40, 10.0, True, False),
        (30, 10.0, False, False),  # not above 3x
        (20, 1.0, False, False),  # above 3x but a handful: rare queries do not spike
        (21, 1.0, True, False),
        (3, 20.0, False, True),
        (4, 20.0, False, False),  # not below expected / 5
        (0, 19.0, False, False),  # too rare for a dip to mean anything
    ],
)
def test_detectors(count, expected, spike, dip):
    model = {"query": "q", "window_start": 5000, "expected": expected, "count": count}
    for name, reported in (("spike-detector", spike), ("dip-detector", dip)):
        h = Harness(zeitgeist, name)
        h.send("models", "q", model, 5999)
        out = h.outputs("anomalies")
        assert bool(out) == reported, name
        if out:
            kind = "spike" if name == "spike-detector" else "dip"
            assert out[0].value == {
                "query": "q",
                "window_start": 5000,
                "kind": kind,
                "observed": count,
                "expected": expected,
            }
            assert out[0].key == "q" and out[0].timestamp == 5999
