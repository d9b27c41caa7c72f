"""Interval joins on a real broker, run by `logwheel run`: left and outer joins over re-keyed
inputs give, across a SIGKILL, exactly the Harness's results (which the unit tests check against
a brute-force reference) — every pair once, every unmatched record once and never one that
matched — late records are dead-lettered at stage "late" and nothing is left in state once every
window closed; a live source that goes quiet still gets its unmatched rows out. (The backfill's
hand-over to `run` is in test_backfill.py, beside its Spark session.)"""

from __future__ import annotations

import json
import random

import pytest

from framework.core.clock import now_ms
from framework.streaming.injector import Injector
from framework.testing import Harness
from tests.support import Job, harness_results, kafka_results, produce, read_topic, wait_for
from tests.support_joins import PERIOD, T0, block, joins_job

pytestmark = pytest.mark.timeout(600)
RUN = ("left", "outer")


@pytest.fixture(scope="module")
def job(kafka, tmp_path_factory):
    """The pipeline and a `logwheel run` of its left, outer and quiet joins (not started)."""
    tmp_path = tmp_path_factory.mktemp("joins")
    pipeline, names, module = joins_job(tmp_path, f"join{random.randrange(10**6)}")
    run = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "state", path=tmp_path)
    run.args += ["--computation", "left", "--computation", "outer", "--computation", "quiet"]
    yield pipeline, names, run
    assert run.stop() == 0


def test_left_and_outer_joins_over_rekeyed_inputs_survive_sigkill_exactly(kafka, job):
    pipeline, names, run = job
    harnesses = {c: Harness(pipeline, c) for c in RUN}
    rng = random.Random(39)
    outer = f"{names['NAME']}-outer"
    run.start().wait_working(3)
    with Injector(pipeline, "gen", bootstrap=kafka) as injector:

        def send(side: str, value: dict, ts: int) -> None:
            stream = names[side.upper()]
            injector.send(stream, value, key=None, timestamp=ts)  # re-keyed by "order"
            for h in harnesses.values():
                h.send(stream, None, value, ts)

        def advance(watermark: int) -> None:
            injector.advance(watermark)
            for h in harnesses.values():
                h.advance_watermark(watermark)

        for i in range(5):
            for side, value, ts in block(rng, i, 20):
                send(side, value, ts)
            # no later record is older: every one arrives ahead of the watermark, so the
            # results cannot depend on how the two inputs interleave in the task
            advance(T0 + (i + 1) * PERIOD - 200)
            if i == 2:  # mid-run, with results out and windows open: a crash
                wait_for(lambda: read_topic(kafka, outer, expect=1, timeout=5), 60)
                run.kill()
                run.start()
        closed = {c: len(h.outputs(f"{names['NAME']}-{c}")) for c, h in harnesses.items()}
        for c in RUN:  # the tasks' watermarks have passed these: what follows is late
            read_topic(kafka, f"{names['NAME']}-{c}", expect=closed[c], timeout=120)
        send("orders", {"order": "o1", "n": -1}, T0 + 10)
        send("payments", {"order": "o2", "m": -1}, T0 + 3_000)
        advance(T0 + 40 * PERIOD)  # no record comes after: the last windows close anyway
    for c, h in harnesses.items():
        out = f"{names['NAME']}-{c}"
        want = harness_results(h.outputs(out))
        alone = [r for r in h.outputs(out) if None in (r.value["left"], r.value["right"])]
        assert alone and len(alone) < len(want), c
        # to the end past the expected count: a duplicate committed with them too
        got = read_topic(kafka, out, expect=sum(want.values()), timeout=120, to_end=True)
        assert kafka_results(got) == want, c
        assert h.late_records == 2
        dead = read_topic(kafka, f"{pipeline.name}.{c}.dlq", expect=2, timeout=30, to_end=True)
        assert [dict(m.headers())["logwheel.error.stage"] for m in dead] == [b"late"] * 2
        # every window closed: each key's state and timer are tombstones, nothing is left
        for journal in ("changelog", "timers"):
            msgs = read_topic(kafka, f"{pipeline.name}.{c}.{journal}", timeout=30, to_end=True)
            latest = {m.key(): m.value() for m in msgs}
            assert latest and set(latest.values()) == {None}, (c, journal)
    rows = [json.loads(m.value()) for m in got]
    assert any(v["left"] is None for v in rows)  # the outer join's unmatched payments too


def test_a_quiet_live_input_still_gets_its_unmatched_rows_out(kafka, job):
    _, names, run = job
    if not run.alive():
        run.start().wait_working(3)
    orders, payments = names["LIVE_ORDERS"], names["LIVE_PAYMENTS"]
    ts = now_ms()  # producers stamp the current time, then go quiet
    produce(kafka, orders, [(f"k{i}", {"o": i}, ts) for i in range(4)])
    produce(kafka, payments, [("k0", {"p": 0}, ts + 100), ("k9", {"p": 9}, ts + 100)])
    got = read_topic(kafka, f"{names['NAME']}-quiet", expect=5, timeout=60)
    rows = sorted((m.key().decode(), m.value().decode()) for m in got)
    assert [(k, json.loads(v)["left"], json.loads(v)["right"]) for k, v in rows] == [
        ("k0", {"o": 0}, {"p": 0}),
        ("k1", {"o": 1}, None),
        ("k2", {"o": 2}, None),
        ("k3", {"o": 3}, None),
        ("k9", None, {"p": 9}),
    ]
