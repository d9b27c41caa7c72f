"""Timers and watermarks under crashes: a three-stage windowed pipeline, SIGKILLed again and
again, emits every window exactly once with the exact count."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter

import pytest

from framework.streaming.injector import Injector
from tests.chaos.windows_job import BUCKET, WINDOW
from tests.support import UniqueJob, read_topic

FULL = os.environ.get("LOGWHEEL_CHAOS_FULL") == "1"
WINDOWS = 200 if FULL else 60
KILLS = 8 if FULL else 4
KEYS = [f"k{i}" for i in range(20)]

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1800 if FULL else 600)]


def feed(pipeline, bootstrap: str, base: int, truth: Counter, advanced: threading.Event) -> None:
    """Events for WINDOWS one-second windows, a window every 0.2 s of wall time; the
    watermark advances past each window once it is written."""
    rng = random.Random(3)
    stream = next(iter(pipeline.sources))
    with Injector(pipeline, "feeder", bootstrap=bootstrap) as injector:
        for w in range(WINDOWS):
            start = base + w * WINDOW
            for _ in range(rng.randint(20, 60)):
                key = rng.choice(KEYS)
                ts = start + rng.randrange(WINDOW)
                injector.send(stream, {"key": key}, key=None, timestamp=ts)
                truth[(key, start)] += 1
            injector.advance(start + WINDOW)
            advanced.set()
            time.sleep(0.2)
        injector.advance(base + WINDOWS * WINDOW)


def test_every_window_once_with_its_exact_count(kafka, tmp_path):
    unique = UniqueJob(kafka, tmp_path, "tests.chaos.windows_job:build", "win")
    pipeline, prefix = unique.pipeline, unique.prefix
    base = (time.time_ns() // 1_000_000 - 3_600_000) // BUCKET * BUCKET
    truth: Counter = Counter()

    advanced = threading.Event()
    feeder = threading.Thread(
        target=feed, args=(pipeline, kafka, base, truth, advanced), daemon=True
    )
    running = unique.job().start()
    feeder.start()
    rng = random.Random(11)
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 0.2 * WINDOWS / KILLS))
            running.wait_working(3)
            # land while windows are closing: just after the watermark moved
            advanced.clear()
            advanced.wait(5)
            time.sleep(rng.uniform(0.0, 0.03))
            assert running.alive(), running.output()[-3000:]
            running.kill()
            running = unique.job().start()
        feeder.join()
        buckets = WINDOWS * WINDOW // BUCKET
        # every ten-second bucket rolled up (the last stage: the others are done by then)
        read_topic(kafka, f"{prefix}rollups", expect=buckets, timeout=300)
        outputs = {
            stage: [
                json.loads(m.value()) for m in read_topic(kafka, f"{prefix}{stage}", to_end=True)
            ]
            for stage in ("counts", "totals", "rollups")
        }
    finally:
        running.stop()

    counts = outputs["counts"]
    assert len(counts) == len(truth), "a (key, window) emitted twice or never"
    assert {(c["key"], c["window"]): c["total"] for c in counts} == dict(truth)

    per_window = Counter()
    for (_, start), n in truth.items():
        per_window[start] += n
    totals = outputs["totals"]
    assert sorted(t["window"] for t in totals) == sorted(per_window)
    assert {t["window"]: t["total"] for t in totals} == dict(per_window)

    per_bucket = Counter()
    for start, n in per_window.items():
        per_bucket[start // BUCKET] += n
    rollups = outputs["rollups"]
    assert sorted(int(r["key"]) for r in rollups) == sorted(per_bucket)
    assert {int(r["key"]): r["total"] for r in rollups} == dict(per_bucket)
