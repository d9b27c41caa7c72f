"""Zeitgeist's computations, alone and chained through Harnesses over generated traffic:
exactly the planted spike and dip are reported, and nothing else."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest

from framework.core.pipeline import BoundedOutOfOrderness, Pipeline
from framework.testing import Harness
from jobs.zeitgeist.computations import (
    DipDetector,
    ModelCalculator,
    SpikeDetector,
    WindowCounter,
    normalize,
    query_key,
)
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


def zeitgeist_pipeline(window_counter: type[WindowCounter] = WindowCounter) -> Pipeline:
    """The job's topology (jobs/zeitgeist's own `pipeline` is the lead's; same shape)."""
    return (
        Pipeline("zeitgeist")
        .source(
            "queries",
            schema="zeitgeist.SearchQuery",
            watermark=BoundedOutOfOrderness(ms=MAX_DELAY_MS),
        )
        .computation(
            "window-counter",
            window_counter,
            inputs={"queries": query_key},
            outputs={"window-counts": "zeitgeist.WindowCount"},
        )
        .computation(
            "model",
            ModelCalculator,
            inputs={"window-counts": None},  # already keyed by query
            outputs={"models": "zeitgeist.Model"},
        )
        .computation(
            "spike-detector",
            SpikeDetector,
            inputs={"models": None},
            outputs={"anomalies": "zeitgeist.Anomaly"},
        )
        .computation(
            "dip-detector",
            DipDetector,
            inputs={"models": None},
            outputs={"anomalies": "zeitgeist.Anomaly"},
        )
    )


@dataclass
class Run:
    """The four computations chained as on Kafka: each one's outputs, then its output
    watermark, feed the next."""

    pipeline: Pipeline = field(default_factory=zeitgeist_pipeline)
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
            if ts < counter.watermark:
                self.late += 1
            else:
                self.sent[(normalize(value["query"]), ts - ts % 1000)] += 1
            counter.send("queries", key, value, ts)
            high = ts if high is None else max(high, ts)
            counter.advance_watermark(high - MAX_DELAY_MS)  # BoundedOutOfOrderness
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


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_exactly_the_planted_anomalies_are_reported(seed):
    r = run(seed)
    check_exactly_planted(r)
    for name, h in r.stages.items():
        assert h.late_records == 0, name  # window_end - 1 is never late downstream
        assert h.dead_letters() == [], name


def test_window_counts_are_complete_dense_and_in_order():
    r = run(7)
    counts = r.outputs("window-counter", "window-counts")
    series: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for rec in counts:
        v = rec.value
        assert rec.key == v["query"] and v["window_end"] == v["window_start"] + 1000
        assert rec.timestamp == v["window_end"] - 1
        series[v["query"]].append((v["window_start"], v["count"]))
    end = first_window(START) + SECONDS * 1000
    for query, windows in series.items():
        starts = [s for s, _ in windows]
        # one record per window, consecutive, from the first window seen to the end of data
        assert starts == list(range(starts[0], end, 1000)), query
        for start, count in windows:
            assert count == r.sent[(query, start)], (query, start)
    assert set(series) == {q.text for q in QUERIES}
    # the planted dip is visible as (near) zeros: the windows exist although nothing came
    dip = next(p for p in planted(START) if p[1] == "dip")
    assert all(c <= 5 for s, c in series[dip[0]] if dip[2] <= s <= dip[3])


def test_late_stragglers_are_dropped_and_counted_without_false_anomalies():
    r = run(3, late_fraction=0.003)
    counter = r.stages["window-counter"]
    assert r.late > 0 and counter.late_records == r.late
    for rec in r.outputs("window-counter", "window-counts"):
        v = rec.value
        assert v["count"] == r.sent[(v["query"], v["window_start"])]
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


def test_window_counter_reports_empty_windows_then_forgets_a_silent_query():
    class ShortMemory(WindowCounter):
        idle_windows = 3

    h = Harness(zeitgeist_pipeline(ShortMemory), "window-counter")
    h.send("queries", "u1", {"query": "Cats "}, 1500)
    h.send("queries", "u2", {"query": "cats"}, 500)  # out of order: an earlier window
    h.send("queries", "u3", {"query": "CATS"}, 3999)
    h.advance_watermark(1999)
    assert h.outputs("window-counts")[-1].value["window_start"] == 0  # [1000, 2000) still open
    h.advance_watermark(100_000)
    got = [
        (r.value["window_start"], r.value["count"], r.timestamp) for r in h.outputs("window-counts")
    ]
    assert got == [
        (0, 1, 999),
        (1000, 1, 1999),
        (2000, 0, 2999),
        (3000, 1, 3999),
        (4000, 0, 4999),
        (5000, 0, 5999),
        (6000, 0, 6999),  # three empty windows in a row: forgotten
    ]
    assert h.state("cats") == {} and h.timers() == []


def test_model_calculator_warms_up_then_predicts_before_it_learns():
    h = Harness(zeitgeist_pipeline(), "model")

    def window(i: int, count: int) -> None:
        v = {"query": "q", "window_start": i * 1000, "window_end": i * 1000 + 1000, "count": count}
        h.send("window-counts", "q", v, i * 1000 + 999)

    for i in range(10):
        window(i, 10 + (i % 2) * 2)  # 10, 12, 10, ...: mean 11
    assert h.outputs("models") == []  # warming up
    assert h.state("q")["expected"] == pytest.approx(11.0)
    window(10, 100)  # a spike: predicted 11, and the model moves only a little
    window(10, 100)  # a replay of the same window is ignored
    window(11, 11)
    models = [r.value for r in h.outputs("models")]
    assert models[0] == {"query": "q", "window_start": 10_000, "expected": 11.0, "count": 100}
    assert models[1]["expected"] == pytest.approx(11 + 0.1 * (23 - 11))  # clamped at 2x + 1
    assert len(models) == 2
    window(22, 0)  # ten windows missed: they decay the average as zeros would
    assert h.outputs("models")[-1].value["expected"] < models[1]["expected"] * 0.9**9


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
    p = zeitgeist_pipeline()
    model = {"query": "q", "window_start": 5000, "expected": expected, "count": count}
    for name, reported in (("spike-detector", spike), ("dip-detector", dip)):
        h = Harness(p, name)
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
