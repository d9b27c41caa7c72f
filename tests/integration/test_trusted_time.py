"""Event time that one skewed or hostile producer cannot move (issue 23, items 1 and 2), on a real
broker with an in-process `Runner`: records stamped far ahead of wall time move no watermark,
and forged marks and timer entries written to a computation's internal topics are refused,
never applied, and land in its dead-letter topic."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import REGISTRY

from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by
from framework.core.api import Timer
from framework.core.clock import now_ms
from framework.core.timers import encode_timer, timer_key
from framework.core.watermarks import Mark, encode_mark
from framework.kafka.topics import create_topics
from framework.streaming.runner import Runner
from tests.support import json_values, read_marks, read_topic, unique_name, wait_for

pytestmark = pytest.mark.timeout(120)

WINDOW = 1_000
AHEAD_MS = 50 * 60_000  # Kafka 4 accepts timestamps up to an hour ahead by default
BASE = 1_700_000_000_000


class Windows(Computation):
    """Counts records per key per one-second event-time window, emitted by a timer at the
    window's end with the watermark and wall time it fired at; every record is echoed to
    `seen`, late ones to `late`."""

    def __init__(self, seen: str, counts: str, late: str) -> None:
        self.seen, self.counts, self.late = seen, counts, late

    def process_record(self, ctx, record):
        start = record.timestamp - record.timestamp % WINDOW
        windows = ctx.state.setdefault("windows", {})
        windows[str(start)] = windows.get(str(start), 0) + 1
        ctx.set_timer(str(start), start + WINDOW)
        ctx.produce(self.seen, {"key": ctx.key, "ts": record.timestamp})

    def process_timer(self, ctx, timer):
        count = ctx.state.get("windows", {}).pop(timer.tag, 0)
        ctx.produce(
            self.counts,
            {
                "key": ctx.key,
                "start": int(timer.tag),
                "end": timer.time,
                "count": count,
                "watermark": ctx.low_watermark,
                "now": ctx.processing_time,
            },
        )

    def on_late_record(self, ctx, record):
        ctx.produce(self.late, {"key": ctx.key, "ts": record.timestamp})


def windows_pipeline(name: str, key=None, **policy) -> tuple[Pipeline, dict[str, str]]:
    t = {s: f"{name}-{s}" for s in ("src", "seen", "counts", "late")}
    pipeline = Pipeline(name, partitions=4)
    pipeline.source(t["src"], watermark=BoundedOutOfOrderness(ms=2000, **policy))
    pipeline.computation(
        "w",
        lambda: Windows(t["seen"], t["counts"], t["late"]),
        inputs={t["src"]: key},
        outputs={t["seen"]: None, t["counts"]: None, t["late"]: None},
    )
    return pipeline, t


@contextmanager
def running(pipeline: Pipeline, computation: str, kafka: str, state_dir) -> Iterator[None]:
    """`computation` run by a Runner in a thread of this process, stopped on the way out."""
    stop = threading.Event()
    runner = Runner(pipeline, computation, bootstrap=kafka, state_dir=state_dir)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            runner.run(stop)
        except BaseException as error:  # reported by the test, not lost in the thread
            failure.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
    assert not failure, failure


def produce_json(producer: Producer, topic: str, records) -> None:
    for key, ts, partition in records:
        producer.produce(
            topic, b'{"k": "%s"}' % key.encode(), key.encode(), partition, timestamp=ts
        )
    assert producer.flush(30) == 0


# -- 1. records stamped far ahead ---------------------------------------------------------------


def test_records_stamped_far_ahead_leave_every_genuine_record_on_time(kafka, tmp_path):
    """One record per partition stamped 50 minutes ahead, then 1,000 stamped now, with the
    default allowance (five minutes): every genuine record is processed on time, the four are
    counted in logwheel_future_records_total and processed, and a window's timer fires only
    once genuine time has passed its end (live: the last windows close on wall time)."""
    name = unique_name("future")
    pipeline, t = windows_pipeline(name, idle_ms=1000, live=True)
    create_topics(kafka, pipeline)
    producer = Producer({"bootstrap.servers": kafka})
    produce_json(producer, t["src"], [(f"f{p}", now_ms() + AHEAD_MS, p) for p in range(4)])
    with running(pipeline, "w", kafka, tmp_path):
        for _ in range(10):
            produce_json(producer, t["src"], [(f"g{i % 20}", now_ms(), i % 4) for i in range(100)])
            time.sleep(0.1)
        seen = read_topic(kafka, t["seen"], expect=1004, timeout=60)
        counts = read_topic(kafka, t["counts"], idle=3.0, timeout=30)
        late = read_topic(kafka, t["late"], idle=1.0, timeout=5)
        sample = REGISTRY.get_sample_value(
            "logwheel_future_records_total", {"computation": "w", "stream": t["src"]}
        )
    stamps = [v["ts"] for v in json_values(seen)]
    assert not late, f"{len(late)} genuine records were late: {json_values(late)[:3]}"
    assert len(stamps) == 1004 and sum(ts > now_ms() + 60_000 for ts in stamps) == 4
    assert sample == 4
    fired = json_values(counts)
    genuine = [f for f in fired if f["key"].startswith("g")]
    assert sum(f["count"] for f in genuine) == 1000, "a genuine window never closed"
    for f in fired:
        assert f["end"] <= f["watermark"] <= f["now"], f"a timer fired before its time: {f}"
    assert not [f for f in fired if f["key"].startswith("f")], "a future window closed"


def test_records_stamped_far_ahead_are_dead_lettered_under_on_future_dead_letter(kafka, tmp_path):
    """The same through a re-keyed input, with on_future="dead_letter": the four records from
    the future reach the dead-letter topic at stage "future" and nothing else."""
    name = unique_name("future-dlq")
    pipeline, t = windows_pipeline(name, key=key_by("k"), on_future="dead_letter")
    create_topics(kafka, pipeline)
    producer = Producer({"bootstrap.servers": kafka})
    produce_json(producer, t["src"], [(f"f{p}", now_ms() + AHEAD_MS, p) for p in range(4)])
    produce_json(producer, t["src"], [(f"g{i % 20}", now_ms(), i % 4) for i in range(1000)])
    with running(pipeline, "w", kafka, tmp_path):
        dead = read_topic(kafka, f"{name}.w.dlq", expect=4, timeout=60)
        seen = read_topic(kafka, t["seen"], expect=1000, timeout=60)
        late = read_topic(kafka, t["late"], idle=1.0, timeout=5)
    assert not late
    assert sorted(v["key"] for v in json_values(seen)) == sorted(f"g{i % 20}" for i in range(1000))
    assert len(dead) == 4
    for msg in dead:
        headers = dict(msg.headers())
        assert headers["logwheel.error.stage"] == b"future"
        assert b"max_future_ms=300000" in headers["logwheel.error"]


def test_genuine_records_lagging_the_clock_stay_on_time_around_records_from_the_future(
    kafka, tmp_path
):
    """Issue 38, finding 3, as a new user met it: 200 genuine records stamped five minutes in
    the past, then one record per partition stamped 50 minutes ahead, then (once the first
    ones' watermark is applied) 1,000 genuine records stamped 4m50s in the past, through a
    re-keyed input with BoundedOutOfOrderness(ms=2000) and the default allowance. A record
    beyond it moves no watermark at all, not even to wall time: every genuine record is
    processed on time. Partition 3 carries only its record from the future: it is idle for
    the watermark — it does not hold the first windows back (they close), nor push anything
    forward (no window of the future records closes, nothing is late)."""
    name = unique_name("lagging")
    pipeline, t = windows_pipeline(name, key=key_by("k"), idle_ms=1000)
    create_topics(kafka, pipeline)
    producer = Producer({"bootstrap.servers": kafka})
    channel = f"{name}.w.watermarks"

    def latest_marks() -> dict:
        return {m.producer: m for m in read_marks(kafka, channel, to_end=True)}

    with running(pipeline, "w", kafka, tmp_path):
        wait_for(lambda: len(latest_marks()) == 8, 60, what="every task to start")
        t0 = now_ms()
        for c in range(10):  # a trickle of 3 s: partitions 0-2 are live while 3 goes idle
            batch = [(f"g{i % 20}", t0 - 300_000 + i, i % 3) for i in range(c * 20, c * 20 + 20)]
            produce_json(producer, t["src"], batch)
            time.sleep(0.3)
        produce_json(producer, t["src"], [(f"f{p}", t0 + AHEAD_MS, p) for p in range(4)])

        def applied() -> bool:  # every keyed task has seen the first records' watermark
            tasks = [latest_marks().get(f"w/task/{p}") for p in range(4)]
            return all(m is not None and m.input_watermark >= t0 - 302_000 for m in tasks)

        wait_for(applied, 60, what="the first records' watermark")
        t1 = now_ms()
        lagging = [(f"g{i % 20}", t1 - 290_000 + i, i % 3) for i in range(1000)]
        produce_json(producer, t["src"], lagging)

        def read_all() -> tuple[list, list]:
            seen = read_topic(kafka, t["seen"], to_end=True)
            return seen, read_topic(kafka, t["late"], to_end=True)

        wait_for(lambda: sum(map(len, read_all())) >= 1204, 60, what="every record processed")
        seen, late = read_all()

        def first_windows() -> list:  # the closed windows of the first 200 records
            counts = json_values(read_topic(kafka, t["counts"], to_end=True))
            return [c for c in counts if c["end"] <= t0 - 299_000 + WINDOW]

        wait_for(lambda: sum(c["count"] for c in first_windows()) >= 200, 30,
                 what="the first records' windows to close")  # fmt: skip
        counts = json_values(read_topic(kafka, t["counts"], to_end=True))
    assert not late, f"{len(late)} genuine records were late: {json_values(late)[:3]}"
    keys = [v["key"] for v in json_values(seen)]
    assert sorted(k for k in keys if k.startswith("g")) == sorted(f"g{i % 20}" for i in range(1200))
    assert sorted(k for k in keys if k.startswith("f")) == [f"f{p}" for p in range(4)]
    first = [c for c in counts if c["end"] <= t0 - 299_000 + WINDOW]
    assert sum(c["count"] for c in first) == 200, "a first record counted twice"
    assert not [c for c in counts if c["key"].startswith("f")], "a future window closed"


# -- 2. forged marks and timer entries ----------------------------------------------------------


def test_forged_marks_and_timer_entries_change_nothing_and_land_in_the_dead_letter_topic(
    kafka, tmp_path
):
    """A computation reads `mid`, whose watermark its writer `relay` (not running) publishes.
    Forged onto its internal topics: a mark of its own with a time a day ahead and two timer
    entries (garbage; one under another timer's key) before it starts; then relay marks with
    no offsets, with an offset far beyond the partition's end, and with a time a day ahead.
    None is applied: only the genuine mark written after them moves the watermark (one window
    closes, the next does not, no forged timer fires, nothing is late), and each forged record
    is in the dead-letter topic with its reason."""
    name = unique_name("forged")
    t = {s: f"{name}-{s}" for s in ("src", "mid", "seen", "counts", "late")}
    pipeline = Pipeline(name, partitions=2)
    pipeline.source(t["src"], watermark=BoundedOutOfOrderness(ms=0))
    pipeline.computation("relay", Computation, inputs={t["src"]: None}, outputs={t["mid"]: None})
    pipeline.computation(
        "w",
        lambda: Windows(t["seen"], t["counts"], t["late"]),
        inputs={t["mid"]: None},
        outputs={t["seen"]: None, t["counts"]: None, t["late"]: None},
    )
    create_topics(kafka, pipeline)
    producer = Producer({"bootstrap.servers": kafka})
    relay, own = f"{name}.relay.watermarks", f"{name}.w.watermarks"
    day_ahead = now_ms() + 86_400_000
    outputs = {(t[s], p): -1 for s in ("seen", "counts", "late") for p in range(2)}

    def mark(channel: str, m: Mark) -> None:
        producer.produce(channel, encode_mark(m), m.producer.encode(), 0)
        assert producer.flush(30) == 0

    mark(own, Mark("w/task/0", day_ahead, False, outputs, day_ahead))
    journal = f"{name}.w.timers"
    entry = encode_timer("k9", "999", Timer(BASE, "999"))
    producer.produce(journal, b"\x00garbage", timer_key("k0", "1"), 0)
    producer.produce(journal, entry, timer_key("k0", "forged"), 0)
    assert producer.flush(30) == 0

    with running(pipeline, "w", kafka, tmp_path):
        dlq = f"{name}.w.dlq"
        wait_for(lambda: len(read_topic(kafka, dlq, idle=0.5)) >= 2, 60, what="refusals")
        produce_json(producer, t["mid"], [(f"k{i % 4}", BASE + i * 10, i % 2) for i in range(200)])
        reader = Consumer({"bootstrap.servers": kafka, "group.id": unique_name("ends")})
        written = {
            (t["mid"], p): reader.get_watermark_offsets(TopicPartition(t["mid"], p), 10)[1] - 1
            for p in range(2)
        }
        reader.close()
        for p in range(2):
            producer_id = f"relay/task/{p}"
            mark(relay, Mark(producer_id, now_ms(), False, {}))
            huge = {tp: 10**12 for tp in written}
            mark(relay, Mark(producer_id, BASE + WINDOW, False, huge))
            mark(relay, Mark(producer_id, day_ahead, False, written))
        for p in range(2):
            mark(relay, Mark(f"relay/task/{p}", BASE + WINDOW, False, written))
        counts = read_topic(kafka, t["counts"], expect=4, timeout=60)
        counts += read_topic(kafka, t["counts"], idle=2.0, timeout=10)[len(counts) :]
        dead = read_topic(kafka, dlq, expect=9, timeout=60)
        late = read_topic(kafka, t["late"], idle=1.0, timeout=5)
    assert not late, f"{len(late)} records late: the watermark moved on a forged mark"
    fired = json_values(counts)
    assert sorted((f["key"], f["start"]) for f in fired) == [(f"k{i}", BASE) for i in range(4)]
    assert sum(f["count"] for f in fired) == 100
    stages = sorted(dict(m.headers())["logwheel.error.stage"].decode() for m in dead)
    assert stages == ["timers"] * 2 + ["watermark"] * 7, stages
    reasons = " | ".join(dict(m.headers())["logwheel.error"].decode() for m in dead)
    for why in ("ahead of wall time", "names no offset", "beyond its end", "under another key"):
        assert why in reasons, reasons


def test_an_injectors_promise_beyond_the_allowance_is_published_as_wall_time_plus_it(kafka):
    """An injector told a watermark 50 minutes ahead (a file stamped in the future) promises
    only wall time plus its max_future_ms, and its mark names every partition it writes."""
    from framework.core.pipeline import InjectorWatermark
    from framework.streaming.injector import Injector

    name = unique_name("inj-future")
    pipeline = Pipeline(name, partitions=2)
    pipeline.source(f"{name}-in", watermark=InjectorWatermark("gen", max_future_ms=60_000))
    pipeline.computation("c", Computation, inputs={f"{name}-in": None})
    with Injector(pipeline, "gen", bootstrap=kafka) as injector:
        before = now_ms()
        injector.advance(before + AHEAD_MS)
        after = now_ms()
    (mark,) = read_marks(kafka, f"{name}.gen.watermarks")
    assert before + 60_000 <= mark.watermark <= after + 60_000
    assert mark.offsets == {(f"{name}-in", 0): -1, (f"{name}-in", 1): -1}
