"""Windows on a real broker, run by `logwheel run`: tumbling, hopping and session windows over
out-of-order event times give, across a SIGKILL, exactly the Harness's results (which the unit
tests check against a brute-force reference), each window once; late records are dropped or
dead-lettered at stage "late"; a live source's windows close once it goes quiet, a replayed
one's never do."""

from __future__ import annotations

import json
import random
import time

import pytest

from framework.core.clock import now_ms
from framework.streaming.injector import Injector
from framework.testing import Harness
from tests.support import (
    Job,
    import_job,
    job_source,
    produce,
    read_topic,
    wait_for,
    write_job,
)
from tests.support import harness_results as expected
from tests.support import kafka_results as results

pytestmark = pytest.mark.timeout(600)

WINDOWS_JOB = """
from framework import BoundedOutOfOrderness, InjectorWatermark, Pipeline, windows

pipeline = Pipeline(NAME, partitions=2)
pipeline.source(EVENTS, watermark=InjectorWatermark("gen"))
pipeline.windowed(
    "tumbling", inputs={EVENTS: None}, window=windows.Tumbling(size_ms=1000),
    aggregate=windows.Count(), output=EVENTS + "-tumbling", on_late="dead_letter",
)
pipeline.windowed(
    "hopping", inputs={EVENTS: None},
    window=windows.Hopping(size_ms=2000, every_ms=500, grace_ms=300),
    aggregate=windows.Sum("n"), output=EVENTS + "-hopping",
)
pipeline.windowed(
    "session", inputs={EVENTS: None}, window=windows.Session(gap_ms=700),
    aggregate=windows.Collect("n"), output=EVENTS + "-session", on_late="dead_letter",
)
pipeline.source(LIVE, watermark=BoundedOutOfOrderness(ms=2000, idle_ms=1000, live=True))
pipeline.windowed(
    "live", inputs={LIVE: None}, window=windows.Tumbling(size_ms=1000),
    aggregate=windows.Count(), output=LIVE + "-counts",
)
pipeline.source(REPLAY, watermark=BoundedOutOfOrderness(ms=2000, idle_ms=1000))
pipeline.windowed(
    "replay", inputs={REPLAY: None}, window=windows.Tumbling(size_ms=1000),
    aggregate=windows.Count(), output=REPLAY + "-counts",
)
"""
SHUFFLED = ("tumbling", "hopping", "session")
PERIOD = 2_500


@pytest.fixture
def job(kafka, tmp_path, unique):
    name = unique("win")
    names = {"NAME": name, "EVENTS": f"{name}-events", "LIVE": f"{name}-live"}
    names["REPLAY"] = f"{name}-replay"
    module = write_job(tmp_path, name.replace("-", "_"), job_source(WINDOWS_JOB, **names))
    pipeline = import_job(tmp_path, module).pipeline
    return pipeline, module, names


def test_windows_over_shuffled_times_survive_sigkill_with_each_window_once(kafka, tmp_path, job):
    pipeline, module, names = job
    events = names["EVENTS"]
    harnesses = {c: Harness(pipeline, c) for c in SHUFFLED}
    rng, base = random.Random(21), now_ms() - 3_600_000
    blocks = []
    for block in range(12):  # each block's times shuffled; the watermark follows the blocks
        start = base + block * PERIOD  # 1 s of records, then a gap that ends the sessions
        blocks.append([(f"k{rng.randrange(6)}", start + rng.randrange(1_000)) for _ in range(150)])
    run = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "state", path=tmp_path)
    for c in SHUFFLED:
        run.args += ["--computation", c]
    run.start().wait_working(3)
    try:
        with Injector(pipeline, "gen", bootstrap=kafka) as injector:

            def send(key: str, ts: int, n: int) -> None:
                injector.send(events, {"n": n}, key=key, timestamp=ts)
                for h in harnesses.values():
                    h.send(events, key, {"n": n}, ts)

            def advance(watermark: int) -> None:
                injector.advance(watermark)
                for h in harnesses.values():
                    h.advance_watermark(watermark)

            for i, block in enumerate(blocks):
                for n, (key, ts) in enumerate(block):
                    send(key, ts, i * 1000 + n)
                advance(base + i * PERIOD)  # closes the block before; this one stays open
                if i == 5:  # mid-run, with results out and windows open: a crash
                    wait_for(lambda: read_topic(kafka, f"{events}-tumbling", expect=1), 60)
                    run.kill()
                    run.start()
            closed = {c: len(h.outputs(f"{events}-{c}")) for c, h in harnesses.items()}
            for c in SHUFFLED:  # the task's watermark has passed them: what follows is late
                read_topic(kafka, f"{events}-{c}", expect=closed[c], timeout=120)
            for n, ts in enumerate([base + 10, base + 4_000, base + 9_000]):  # all closed
                send(f"k{n}", ts, -1)
            advance(base + 13 * PERIOD)
        for c, h in harnesses.items():
            out = f"{events}-{c}"
            want = expected(h.outputs(out))
            # to the end past the expected count: a duplicate committed with them too
            got = read_topic(kafka, out, expect=sum(want.values()), timeout=120, to_end=True)
            assert results(got) == want, c
            assert h.late_records == 3
            late = [] if c == "hopping" else [b"late"] * 3
            dlq = f"{pipeline.name}.{c}.dlq"
            dead = read_topic(kafka, dlq, expect=len(late), timeout=30, to_end=True)
            stages = [dict(m.headers())["logwheel.error.stage"] for m in dead]
            assert stages == late, c
            # every window closed: the key's state and timers are tombstones, nothing is left
            # (written in the transactions of the last outputs, read above)
            for journal in ("changelog", "timers"):
                msgs = read_topic(kafka, f"{pipeline.name}.{c}.{journal}", timeout=30, to_end=True)
                latest = {m.key(): m.value() for m in msgs}
                assert latest and set(latest.values()) == {None}, (c, journal)
    finally:
        assert run.stop() == 0


def test_a_live_sources_windows_close_once_it_is_quiet_and_a_replays_never(kafka, tmp_path, job):
    pipeline, module, names = job
    live, replay = names["LIVE"], names["REPLAY"]
    run = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "state", path=tmp_path)
    run.args += ["--computation", "live", "--computation", "replay"]
    run.start().wait_working(2)
    try:
        sent = []
        for _ in range(6):  # producers stamp the current time, on both partitions
            ts = now_ms()
            batch = [(f"k{i}", ts) for i in range(4)]
            for stream in (live, replay):
                produce(kafka, stream, [(k, {}, ts) for k, ts in batch])
            sent += batch
            time.sleep(0.3)
        windows = {(k, ts - ts % 1000) for k, ts in sent}
        quiet = time.monotonic()
        got = read_topic(kafka, f"{live}-counts", expect=len(windows), timeout=60)
        closed_after = time.monotonic() - quiet
        assert {(m.key().decode(), json.loads(m.value())["start"]) for m in got} == windows
        assert sum(json.loads(m.value())["value"] for m in got) == len(sent)
        # the replay stream went as quiet: its watermark holds, its last window stays open
        replayed = read_topic(kafka, f"{replay}-counts", timeout=max(3, closed_after), idle=3)
        last = max(ts for _, ts in sent)
        starts = {json.loads(m.value())["start"] for m in replayed}
        assert last - last % 1000 not in starts
        assert run.output().count("Traceback") == 0
    finally:
        assert run.stop() == 0
