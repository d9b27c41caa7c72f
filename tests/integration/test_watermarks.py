"""Low watermarks on a real broker, with real `logwheel run` processes (invariants 4 and 5 of
docs/invariants.md, MillWheel §4.5, §4.6 and §7.2): a watermark never overtakes the data it
speaks for, a silent source partition stops holding it back after its idle timeout, and what
hooks observe and what tasks publish never moves backwards, even across SIGKILL."""

from __future__ import annotations

import itertools
import random
import threading
import time

import pytest
from confluent_kafka import Producer

from framework.core.api import MIN_TIME
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

WINDOW = 1_000
BASE = 1_700_000_000_000  # event time of the first window; a multiple of WINDOW

# Window counting shared by the jobs below: a count per key per 1-second event-time window in
# ctx.state, emitted by an event-time timer at the window's end; late records go to LATE.
WINDOW_COUNTER = """
import json
import time

from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by
from framework.core.pipeline import InjectorWatermark

WINDOW = 1000


class WindowCounter(Computation):
    def __init__(self, counts, late, delay=0.0):
        self.counts, self.late, self.delay = counts, late, delay

    def process_record(self, ctx, record):
        if self.delay:
            time.sleep(self.delay)
        start = record.timestamp - record.timestamp % WINDOW
        windows = ctx.state.setdefault("windows", {})
        windows[str(start)] = windows.get(str(start), 0) + 1
        ctx.set_timer(str(start), start + WINDOW)

    def process_timer(self, ctx, timer):
        count = ctx.state.get("windows", {}).pop(timer.tag, 0)
        ctx.produce(
            self.counts,
            {"key": ctx.key, "window_start": int(timer.tag), "count": count,
             "low_watermark": ctx.low_watermark},
        )

    def on_late_record(self, ctx, record):
        ctx.produce(
            self.late, {"key": ctx.key, "timestamp": record.timestamp,
                        "low_watermark": ctx.low_watermark},
        )
"""


def window_counts(msgs: list) -> dict[tuple[str, int], list[int]]:
    """(key, window start) -> every count emitted for it."""
    out: dict[tuple[str, int], list[int]] = {}
    for v in json_values(msgs):
        out.setdefault((v["key"], v["window_start"]), []).append(v["count"])
    return out


# -- 1. a watermark never overtakes data ------------------------------------------------------

RELAY_JOB = (
    WINDOW_COUNTER
    + """

class Relay(Computation):
    def __init__(self, mid):
        self.mid = mid

    def process_record(self, ctx, record):
        ctx.produce(self.mid, record.value, key=record.value["k"])


NAME, SOURCE, MID, COUNTS, LATE = NAMES
pipeline = Pipeline(NAME)
pipeline.source(SOURCE, watermark=InjectorWatermark("gen"))
pipeline.computation("relay", lambda: Relay(MID), inputs={SOURCE: None}, outputs={MID: None})
pipeline.computation(
    "window-counter",
    lambda: WindowCounter(COUNTS, LATE, delay=DELAY),
    inputs={MID: None},
    outputs={COUNTS: None, LATE: None},
)
"""
)

KEYS = [f"k{i}" for i in range(4)]
WINDOWS = 8
PER_KEY_WINDOW = 50  # 1,600 records: more than a poll batch (1,000), so the counter lags


def test_watermark_never_overtakes_data(kafka, tmp_path):
    """A slow consumer of `mid` never fires a timer for a window whose records it has not
    read yet: the relay's watermark reaches it long before the relay's records do, and must
    wait for them (it is applied only past the offsets it names)."""
    from framework.streaming.injector import Injector

    name = unique_name("wm-overtake")
    names = (name, f"{name}-src", f"{name}-mid", f"{name}-counts", f"{name}-late")
    _, source, _, counts_topic, late_topic = names
    module = write_job(
        tmp_path, name.replace("-", "_"), job_source(RELAY_JOB, NAMES=names, DELAY=0.003)
    )
    pipeline = import_job(tmp_path, module).pipeline
    with Injector(pipeline, "gen", bootstrap=kafka) as injector:
        job = start_job(tmp_path, module, kafka, computations=2)
        try:
            # Fast: every window written and promised at once, far ahead of the counter. The
            # source's Kafka key is random, so each key reaches the counter through all four
            # relay tasks, whose watermarks it must combine.
            for w in range(WINDOWS):
                start = BASE + w * WINDOW
                for j in range(PER_KEY_WINDOW):
                    for key in KEYS:
                        ts = start + (j * WINDOW) // PER_KEY_WINDOW
                        injector.send(source, {"k": key, "j": j}, key=None, timestamp=ts)
                injector.advance(start + WINDOW)
            expected = len(KEYS) * WINDOWS
            msgs = read_topic(kafka, counts_topic, expect=expected, timeout=45)
            msgs += read_topic(kafka, counts_topic, idle=1.0, timeout=10)[len(msgs) :]
            late = read_topic(kafka, late_topic, idle=1.0, timeout=10)
        finally:
            assert job.stop() == 0, job.output()[-3000:]
    counts = window_counts(msgs)
    truth = {(k, BASE + w * WINDOW): [PER_KEY_WINDOW] for k in KEYS for w in range(WINDOWS)}
    wrong = {kw: counts.get(kw) for kw in truth if counts.get(kw) != truth[kw]}
    assert not wrong, (
        f"{len(wrong)} windows fired before all their records were read, or never "
        f"(count {PER_KEY_WINDOW} expected): {sorted(wrong.items())[:6]}"
    )
    assert counts == truth
    assert not late, f"{len(late)} records arrived behind the watermark: {json_values(late)[:3]}"


# -- 2. a silent partition stops holding the watermark back ------------------------------------

BOUNDED_JOB = (
    WINDOW_COUNTER
    + """

NAME, SOURCE, COUNTS, LATE = NAMES
pipeline = Pipeline(NAME, partitions=4)
pipeline.source(SOURCE, watermark=BoundedOutOfOrderness(ms=BOUND, idle_ms=2000))
pipeline.computation(
    "windows",
    lambda: WindowCounter(COUNTS, LATE),
    inputs={SOURCE: key_by("k")},
    outputs={COUNTS: None, LATE: None},
)
"""
)

IDLE_MS = 2_000
CLOSE_BOUND_S = 90
"""A liveness bound: a window closes about IDLE_MS after partitions 1-3 were first read (a
silent partition that held the watermark back would close none, ever); 90 s leaves room for a
loaded machine's restores, commits and marks on the way."""


def test_silent_partition_does_not_hold_the_watermark_back(kafka, tmp_path):
    """Only partition 0 of a 4-partition source gets records. The other three never report a
    watermark; after idle_ms they are left out of the minimum, so windows close."""
    name = unique_name("wm-idle")
    names = (name, f"{name}-src", f"{name}-counts", f"{name}-late")
    _, source, counts_topic, _ = names
    source_code = job_source(BOUNDED_JOB, NAMES=names, BOUND=200)
    module = write_job(tmp_path, name.replace("-", "_"), source_code)
    job = start_job(tmp_path, module, kafka, computations=1)
    stop = threading.Event()
    fed: list[int] = []

    def feed() -> None:
        producer = Producer({"bootstrap.servers": kafka})
        i = 0
        while not stop.is_set():
            ts = BASE + i * 100  # 10 records per window, 5 per key
            producer.produce(source, f'{{"k": "k{i % 2}"}}'.encode(), partition=0, timestamp=ts)
            producer.flush(10)
            fed.append(ts)
            i += 1
            time.sleep(0.05)

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        feeder.start()
        msgs = wait_for(
            lambda: read_topic(kafka, counts_topic, idle=0.5, timeout=5),
            CLOSE_BOUND_S,
            interval=0.5,
            what="a window to close although partitions 1-3 are silent",
        )
        stop.set()
        feeder.join(10)
        marks = read_marks(kafka, f"{name}.windows.watermarks", idle=1.0, timeout=10)
    finally:
        stop.set()
        assert job.stop() == 0, job.output()[-3000:]
    counts = window_counts(msgs)
    assert counts, "no window closed"
    assert all(c == [5] for c in counts.values()), f"partial or repeated windows: {counts}"
    # the computation's own published watermark advanced (every keyed task's, since each one
    # combines all four repartitioning producers, busy or idle)
    tasks = {m.producer for m in marks if "/task/" in m.producer}
    assert len(tasks) == 4, tasks
    for producer in tasks:
        latest = [m.watermark for m in marks if m.producer == producer][-1]
        assert latest >= BASE + WINDOW, (producer, latest)
    silent = {m.producer for m in marks if "/by-key/" in m.producer and m.idle}
    assert silent >= {f"windows/by-key/{source}/{p}" for p in (1, 2, 3)}, silent


def test_a_partition_is_not_idle_before_it_was_read(kafka, tmp_path):
    """Idleness is silence while being read: partitions 1-3 get their first records half a
    second after the job took its partitions, well within idle_ms (2 s), so they still hold
    the watermark back and none of their records is late, although partition 0 already
    reported a watermark a minute ahead of them. (Taking the partitions includes restoring
    every task, which takes longer than idle_ms here: the silence must be counted from when
    reading starts, not from when the task was built.)"""
    from framework.kafka.topics import create_topics

    name = unique_name("wm-start")
    names = (name, f"{name}-src", f"{name}-counts", f"{name}-late")
    _, source, counts_topic, late_topic = names
    source_code = job_source(BOUNDED_JOB, NAMES=names, BOUND=0)
    module = write_job(tmp_path, name.replace("-", "_"), source_code)
    create_topics(kafka, import_job(tmp_path, module).pipeline)
    producer = Producer({"bootstrap.servers": kafka})
    for i in range(20):  # waiting when the job starts, a minute ahead
        value = f'{{"k": "ahead{i % 2}"}}'.encode()
        producer.produce(source, value, partition=0, timestamp=BASE + 60_000 + i * 100)
    producer.flush(10)
    job = start_job(tmp_path, module, kafka, computations=1)
    try:
        time.sleep(0.5)
        for p in (1, 2, 3):
            for i in range(20):  # 10 per window, 2 windows per partition
                value = f'{{"k": "p{p}"}}'.encode()
                producer.produce(source, value, partition=p, timestamp=BASE + i * 100)
        producer.flush(10)

        def settled() -> tuple[list, list] | None:
            late = read_topic(kafka, late_topic, idle=0.5, timeout=5)
            msgs = read_topic(kafka, counts_topic, idle=0.5, timeout=5)
            return (late, msgs) if late or len(msgs) >= 3 else None

        late, msgs = wait_for(settled, 30, what="windows of partitions 1-3 to close")
        late += read_topic(kafka, late_topic, idle=1.0, timeout=10)[len(late) :]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    behind = sorted({v["low_watermark"] - BASE for v in json_values(late)})
    assert not late, (
        f"{len(late)} records of partitions read for half a second were late, behind "
        f"watermarks {behind} (ms after BASE): the partitions were taken for idle before "
        "they were read"
    )
    assert window_counts(msgs) == {(f"p{p}", BASE): [10] for p in (1, 2, 3)}


# -- 3. watermarks are monotone, across SIGKILL ------------------------------------------------

ECHO_JOB = """
from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by


class Echo(Computation):
    def __init__(self, out):
        self.out = out

    def process_record(self, ctx, record):
        ctx.produce(self.out, {"n": record.value["n"], "low_watermark": ctx.low_watermark})


NAME, SOURCE, OUT = NAMES
pipeline = Pipeline(NAME, partitions=2)
pipeline.source(SOURCE, watermark=BoundedOutOfOrderness(ms=500, idle_ms=5000))
pipeline.computation("echo", lambda: Echo(OUT), inputs={SOURCE: key_by("k")},
                     outputs={OUT: None})
"""


@pytest.mark.timeout(180)
def test_watermarks_are_monotone_across_sigkill(kafka, tmp_path):
    """Per key, ctx.low_watermark in output order never decreases, though the job is killed
    twice while records flow; the marks each task publishes never decrease either."""
    name = unique_name("wm-mono")
    names = (name, f"{name}-src", f"{name}-out")
    _, source, out_topic = names
    module = write_job(tmp_path, name.replace("-", "_"), job_source(ECHO_JOB, NAMES=names))
    job = start_job(tmp_path, module, kafka, computations=1)
    stop = threading.Event()
    fed = [0]

    def feed() -> None:
        rng = random.Random(3)
        producer = Producer({"bootstrap.servers": kafka, "partitioner": "murmur2_random"})
        while not stop.is_set():
            n = fed[0]
            # out of order by up to 300 ms, within the source's 500 ms bound: nothing is late
            ts = time.time_ns() // 1_000_000 - rng.randrange(300)
            value = f'{{"k": "k{n % 8}", "n": {n}}}'.encode()
            producer.produce(source, value, str(n).encode(), timestamp=ts)
            producer.poll(0)
            fed[0] += 1
            time.sleep(0.01)
        producer.flush(30)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    pace = random.Random(5)
    try:
        for _ in range(2):
            # land the kill while records flow, once the watermark is known
            wait_for(
                lambda: any(
                    v["low_watermark"] > MIN_TIME
                    for v in json_values(read_topic(kafka, out_topic, idle=0.3, timeout=5))
                ),
                30,
                what="output with a known watermark",
            )
            time.sleep(pace.uniform(0.3, 1.0))
            job.kill()
            job = start_job(tmp_path, module, kafka, computations=1)
        time.sleep(2)
        stop.set()
        feeder.join(30)
        total = fed[0]
        msgs = read_topic(kafka, out_topic, expect=total, timeout=60)
        msgs += read_topic(kafka, out_topic, idle=1.5, timeout=10)[len(msgs) :]
        marks = read_marks(kafka, f"{name}.echo.watermarks", idle=1.0, timeout=10)
    finally:
        stop.set()
        assert job.stop() == 0, job.output()[-3000:]
    assert sorted(_echoed(msgs)) == list(range(total)), "records lost or duplicated"
    per_key: dict[str, list] = {}
    for m in msgs:
        per_key.setdefault(m.key().decode(), []).append(m)
    for key, rows in per_key.items():
        assert len({m.partition() for m in rows}) == 1, f"key {key} spread over partitions"
        observed = [v["low_watermark"] for v in json_values(sorted(rows, key=lambda m: m.offset()))]
        assert observed[-1] > MIN_TIME
        backwards = [(a, b) for a, b in itertools.pairwise(observed) if b < a]
        assert not backwards, f"key {key}: ctx.low_watermark moved back {backwards[:3]}"
    by_producer: dict[str, list[int]] = {}
    for mark in marks:
        by_producer.setdefault(mark.producer, []).append(mark.watermark)
    assert len(by_producer) == 4, sorted(by_producer)  # 2 keyed tasks, 2 repartitioners
    for producer, values in by_producer.items():
        backwards = [(a, b) for a, b in itertools.pairwise(values) if b < a]
        assert not backwards, f"{producer} published a watermark lower than before {backwards}"


def _echoed(msgs: list) -> list[int]:
    return [v["n"] for v in json_values(msgs)]
