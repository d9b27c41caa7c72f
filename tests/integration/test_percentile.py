"""Percentile low watermarks on a real broker (MillWheel §7.2): a re-keyed computation over
eight source partitions, one of which lags minutes behind while the rest advance at the same
rate. With `Percentile(0.85)` the windows and timers of the keys the seven feed close on time
and the straggler's records are late (dead-lettered, or dropped and counted); with the default
strict watermark the same windows wait; the strict watermark published downstream never passes
a pending record."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from framework.ops.status import status
from tests.support import (
    import_job,
    job_source,
    json_values,
    read_marks,
    read_topic,
    start_job,
    unique_name,
    wait_for,
    write_job,
)

pytestmark = pytest.mark.timeout(240)

JOB = """
from framework import BoundedOutOfOrderness, Computation, Percentile, Pipeline, key_by, windows


class Ticks(Computation):
    \"\"\"Counts per key and second by hand, with event-time timers.\"\"\"

    def process_record(self, ctx, record):
        end = record.timestamp - record.timestamp % 1000 + 1000
        ctx.state[str(end)] = ctx.state.get(str(end), 0) + 1
        ctx.set_timer(str(end), end)

    def process_timer(self, ctx, timer):
        value = {"key": ctx.key, "start": timer.time - 1000, "value": ctx.state.pop(timer.tag)}
        ctx.produce(NAME + "-ticks-counts", value)


NAME, CLICKS = NAMES
pipeline = Pipeline(NAME, partitions=8)
pipeline.source(CLICKS, watermark=BoundedOutOfOrderness(ms=0, idle_ms=600_000))
for name, low_watermark in (("fast", Percentile(0.85)), ("strict", None)):
    pipeline.windowed(
        name,
        inputs={CLICKS: key_by("user")},
        window=windows.Tumbling(size_ms=1000),
        aggregate=windows.Count(),
        output=f"{NAME}-{name}-counts",
        on_late="dead_letter",
        partitions=2,
        low_watermark=low_watermark,
    )
pipeline.computation(
    "ticks",
    Ticks,
    inputs={CLICKS: key_by("user")},
    outputs={NAME + "-ticks-counts": None},
    partitions=2,
    low_watermark=Percentile(0.85),
)
"""

BASE = 1_700_000_000_000  # a multiple of the window
BEHIND = 3 * 60_000  # how far partition 7's event time lags the others'
STRAGGLER = 7
ROUNDS = 120  # a record to each of the 8 partitions per round, 10 rounds a second
STEP = 500  # event time a round moves


def timestamp(partition: int, i: int) -> int:
    return BASE + i * STEP - (BEHIND if partition == STRAGGLER else 0)


def counted(msgs: list) -> dict[int, int]:
    """Records each source partition's keys were counted in, over every window produced;
    fails if a window was produced twice."""
    windows = [(v["key"], v["start"]) for v in json_values(msgs)]
    assert len(windows) == len(set(windows)), "a window was produced twice"
    out: dict[int, int] = {}
    for v in json_values(msgs):
        partition = int(v["key"].split("-")[0][1:])
        out[partition] = out.get(partition, 0) + v["value"]
    return out


def test_a_percentile_closes_the_seven_partitions_windows_while_one_straggles(kafka, tmp_path):
    name = unique_name("pctl")
    clicks = f"{name}-clicks"
    module = write_job(tmp_path, name.replace("-", "_"), job_source(JOB, NAMES=(name, clicks)))
    pipeline = import_job(tmp_path, module).pipeline
    job = start_job(tmp_path, module, kafka, computations=3)
    try:
        producer = Producer({"bootstrap.servers": kafka, "enable.idempotence": True})
        for i in range(ROUNDS):
            for p in range(8):
                value = json.dumps({"user": f"p{p}-{i % 3}"}).encode()
                producer.produce(clicks, value, partition=p, timestamp=timestamp(p, i))
            producer.flush(10)
            time.sleep(0.1)
        # the seven's windows up to their common watermark close: the last round's time
        closed_by = timestamp(0, ROUNDS - 1)
        expected = sum(1 for i in range(ROUNDS) if timestamp(0, i) < closed_by - closed_by % 1000)

        def fast_done() -> bool:
            for out in ("fast", "ticks"):
                counts = counted(read_topic(kafka, f"{name}-{out}-counts", idle=0.5, timeout=10))
                if not all(counts.get(p) == expected for p in range(7)):
                    return False
            return True

        wait_for(fast_done, 90, interval=1, what="the seven partitions' windows to close")
        time.sleep(3)  # the marks and offsets of the last records
        fast = counted(read_topic(kafka, f"{name}-fast-counts", idle=1, timeout=10))
        ticks = counted(read_topic(kafka, f"{name}-ticks-counts", idle=1, timeout=10))
        dead = read_topic(kafka, f"{name}.fast.dlq", idle=1, timeout=10)
        strict_out = read_topic(kafka, f"{name}-strict-counts", idle=1, timeout=10)
        strict_dead = read_topic(kafka, f"{name}.strict.dlq", idle=1, timeout=10)
        marks = read_marks(kafka, f"{name}.fast.watermarks", idle=1, timeout=10)
        rows = status(pipeline, kafka)
    finally:
        assert job.stop() == 0, job.output()[-3000:]

    # with Percentile(0.85): the seven's windows and timers closed and fired, though the
    # straggler is minutes behind
    assert all(fast[p] == expected for p in range(7)), fast
    assert all(ticks[p] == expected for p in range(7)), ticks
    # the straggler's records are late, dead-lettered with their reason; none disappears
    keys = {m.key().decode() for m in dead}
    stages = {dict(m.headers())["logwheel.error.stage"] for m in dead}
    assert dead and all(k.startswith(f"p{STRAGGLER}-") for k in keys) and stages == {b"late"}
    assert fast.get(STRAGGLER, 0) + len(dead) == ROUNDS
    # with the default the seven's windows wait: the strict watermark is the straggler's,
    # minutes behind them; only the straggler's own windows close, and nothing is late
    assert set(counted(strict_out)) == {STRAGGLER} and strict_dead == []

    # what the fast computation published stayed the strict watermark: never past the
    # straggler's latest record, so none of its pending records can be behind it
    straggler_at = timestamp(STRAGGLER, ROUNDS - 1)
    tasks = [m for m in marks if "/task/" in m.producer]
    assert tasks and all(m.watermark <= straggler_at for m in tasks)
    last = {m.producer: m for m in tasks}
    assert all(m.input_watermark >= closed_by - 1000 for m in last.values())  # it fired ahead
    # every late record was late only because of the percentile, never by the strict one
    assert sum(m.percentile_late for m in last.values()) == len(dead)

    keyed = [r for r in rows if r.computation == "fast" and r.topic.endswith(".by-key")]
    assert sum(r.percentile_late for r in keyed) == len(dead)
    assert all(r.percentile_watermark > r.low_watermark for r in keyed)
    assert all(r.percentile_late is None for r in rows if r.computation == "strict")
    # the timers' computation drops the straggler's late records (the default), counted
    late = sum(r.percentile_late for r in rows if r.computation == "ticks" and r.percentile_late)
    assert late > 0 and ticks.get(STRAGGLER, 0) + late == ROUNDS
