"""Record-id deduplication on a real broker, run by `logwheel run`: a producer that re-sends
a fifth of its records 1-40 positions later (same `logwheel.id`), and a SIGKILL mid-run; per
key, a deduplicating computation's outputs are exactly the deduplicated input, each once, while
the same computation without `dedup` shows every duplicate (so the test can fail). A task
restored from the journals alone (local state deleted) still knows every id."""

from __future__ import annotations

import random
import shutil

import pytest

from framework.core.clock import now_ms
from framework.core.dedup import decode_segment
from tests.integration.dedup_clicks import counted, per_key, send_clicks
from tests.support import Job, import_job, job_source, read_topic, wait_for, write_job

pytestmark = pytest.mark.timeout(600)

DEDUP_JOB = """
from framework import Computation, Dedup, Pipeline, key_by


class Count(Computation):
    def __init__(self, out):
        self.out = out

    def process_record(self, ctx, record):
        n = ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.produce(self.out, {"click": record.value["click"], "n": n})


pipeline = Pipeline(NAME, partitions=2)
pipeline.source(CLICKS)
pipeline.computation(
    "dedup", lambda: Count(CLICKS + "-dedup"), inputs={CLICKS: key_by("user")},
    outputs={CLICKS + "-dedup": None}, dedup=Dedup(horizon_ms=3_600_000),
)
pipeline.computation(
    "plain", lambda: Count(CLICKS + "-plain"), inputs={CLICKS: None},
    outputs={CLICKS + "-plain": None},
)
"""


def _clicks(n: int, seed: int = 26) -> list[tuple[str, str, int]]:
    """`n` sends (user, click id, index) of which about a fifth re-send an earlier click of
    the same user 1-40 positions after it."""
    rng = random.Random(seed)
    sends: list[tuple[str, str, int] | None] = [None] * (n + 64)
    fresh, i = 0, 0
    while i < n:
        if sends[i] is None:
            user = f"user-{rng.randrange(20)}"
            sends[i] = (user, f"click-{fresh}", fresh)
            fresh += 1
            if rng.random() < 0.25:  # some re-sent slots are taken: about 20 % in the end
                later = i + rng.randint(1, 40)
                if sends[later] is None:
                    sends[later] = sends[i]
        i += 1
    return [s for s in sends[:n] if s is not None]


def test_duplicates_from_a_retrying_producer_are_dropped_once_each_across_a_sigkill(
    kafka, tmp_path, unique
):
    name = unique("dedup")
    clicks = f"{name}-clicks"
    module = write_job(
        tmp_path, name.replace("-", "_"), job_source(DEDUP_JOB, NAME=name, CLICKS=clicks)
    )
    pipeline = import_job(tmp_path, module).pipeline
    from framework.kafka.topics import create_topics

    create_topics(kafka, pipeline)
    base = now_ms() - 600_000
    sends = [(user, click, base + i) for user, click, i in _clicks(6_000)]
    assert 0.15 < 1 - len({s[1] for s in sends}) / len(sends) < 0.25  # ~20 % re-sent
    want = counted([s[:2] for s in sends], dedup=True)
    raw = counted([s[:2] for s in sends], dedup=False)

    run = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "state", path=tmp_path)
    run.start().wait_working(2)
    try:
        send_clicks(kafka, clicks, sends[:3_000])
        wait_for(lambda: read_topic(kafka, f"{clicks}-dedup", expect=500, idle=1), 60)
        run.kill()  # mid-run: duplicates on both sides of the crash
        run.start()
        send_clicks(kafka, clicks, sends[3_000:])
        deduped = sum(map(len, want.values()))
        # each to the end past its expected count: any duplicate committed with them too
        got = read_topic(kafka, f"{clicks}-dedup", expect=deduped, timeout=180, to_end=True)
        plain = read_topic(kafka, f"{clicks}-plain", expect=len(sends), timeout=180, to_end=True)
        run.stop()
        shutil.rmtree(tmp_path / "state")  # the ids come back from the id journal alone
        run.start().wait_working(2)
        send_clicks(kafka, clicks, sends[-300:])  # sent again: duplicates, every one
        read_topic(kafka, f"{clicks}-plain", expect=len(plain) + 300, timeout=120)
        again = read_topic(kafka, f"{clicks}-dedup", to_end=True)  # committed with plain's
    finally:
        run.stop()
    assert len(again) == len(got), "a restored task took duplicates for new records"
    assert per_key(got) == want
    assert per_key(plain) == raw  # without dedup: every duplicate, counted
    assert per_key(plain) != per_key(got)
    journal = read_topic(kafka, f"{pipeline.name}.dedup.ids", to_end=True)
    held = [pair for m in journal for pair in decode_segment(m.key(), m.value()).ids]
    assert len(held) == len(set(held)) == deduped  # each new id journaled once
