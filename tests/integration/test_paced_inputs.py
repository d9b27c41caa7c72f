"""A backlog of two inputs, written at once after the job went idle, is read in step by event
time (framework/streaming/pacing.py) and joined exactly: no input is taken as idle while it
has records not yet read, so the other cannot move the watermark past them (they would be
dropped as late: a 30,000-record bench run lost half its pairs so), and a task of both inputs
handles their records in time order, not one input's whole backlog before the other's."""

from __future__ import annotations

import bisect
import collections
import json
import random
import time

import pytest
from confluent_kafka import Producer

from framework.core.clock import now_ms
from framework.streaming.pacing import DRIFT_MS
from tests.support import job_source, read_topic, start_job, unique_name, write_job

pytestmark = pytest.mark.timeout(300)
ORDERS_N, KEYS, SPACING_MS, AFTER_MS, IDLE_MS = 2_000, 16, 20, 1_000, 1_000

JOB = """
from framework import BoundedOutOfOrderness, Computation, Pipeline

class Seen(Computation):
    def process_record(self, ctx, record):
        ctx.produce(NAME + "-seen", {"s": record.stream, "t": record.timestamp})

pipeline = Pipeline(NAME, partitions=2)
for stream in (NAME + "-orders", NAME + "-payments"):
    pipeline.source(stream, watermark=BoundedOutOfOrderness(ms=0, idle_ms=IDLE_MS))
inputs = {NAME + "-orders": None, NAME + "-payments": None}
pipeline.join(
    "pairs", left=NAME + "-orders", right=NAME + "-payments", inputs=inputs,
    before_ms=0, after_ms=AFTER_MS, how="inner", output=NAME + "-pairs",
)
pipeline.computation("seen", Seen, inputs=inputs, outputs={NAME + "-seen": None})
"""


def _backlog(name: str) -> tuple[list, list]:
    """Orders in time order over `KEYS` customers, each paid 0 to 1.5 x AFTER_MS later;
    payments in time order too (so each partition's records are)."""
    rng, t0 = random.Random(7), now_ms() - 3_600_000
    orders = [(f"c{rng.randrange(KEYS)}", t0 + i * SPACING_MS, i) for i in range(ORDERS_N)]
    payments = sorted(
        ((key, t + rng.randrange(AFTER_MS * 3 // 2), i) for key, t, i in orders),
        key=lambda r: r[1],
    )
    return orders, payments


def _pairs(orders: list, payments: list) -> collections.Counter:
    """Brute force: every (order, payment) of a key with t_o <= t_p <= t_o + AFTER_MS."""
    by_key = collections.defaultdict(list)
    for key, t, i in payments:
        by_key[key].append((t, i))
    out: collections.Counter = collections.Counter()
    for key, t, i in orders:
        paid = by_key[key]
        lo, hi = bisect.bisect_left(paid, (t, -1)), bisect.bisect_right(paid, (t + AFTER_MS, 1e9))
        out.update((key, i, j) for _, j in paid[lo:hi])
    return out


def test_a_backlog_of_two_inputs_written_after_they_went_idle_joins_exactly(kafka, tmp_path):
    name = unique_name("paced")
    source = job_source(JOB, NAME=name, IDLE_MS=IDLE_MS, AFTER_MS=AFTER_MS)
    module = write_job(tmp_path, name.replace("-", "_"), source)
    job = start_job(tmp_path, module, kafka, computations=2)
    try:
        time.sleep(3 * IDLE_MS / 1000)  # both inputs silent: idle
        orders, payments = _backlog(name)
        producer = Producer(
            {"bootstrap.servers": kafka, "transactional.id": name, "partitioner": "murmur2"}
        )
        producer.init_transactions()
        producer.begin_transaction()
        for topic, records in (("orders", orders), ("payments", payments)):
            for key, t, i in records:
                value = json.dumps({"id": i}).encode()
                producer.produce(f"{name}-{topic}", value, key.encode(), timestamp=t)
                producer.poll(0)
        producer.commit_transaction()
        want = _pairs(orders, payments)
        got = read_topic(kafka, f"{name}-pairs", expect=sum(want.values()), timeout=120,
                         to_end=True)  # fmt: skip
        pairs = collections.Counter(
            (v["key"], v["left"]["id"], v["right"]["id"]) for v in map(json.loads, _values(got))
        )
        assert pairs == want, (len(want), sum(pairs.values()))
        seen = read_topic(kafka, f"{name}-seen", expect=2 * ORDERS_N, timeout=120)
    finally:
        assert job.stop() == 0
    for partition in (0, 1):  # each task's order: never more than DRIFT_MS back in time
        times = [json.loads(m.value())["t"] for m in seen if m.partition() == partition]
        assert times
        highest = times[0]
        for t in times:
            assert t >= highest - DRIFT_MS, (partition, t, highest)
            highest = max(highest, t)


def _values(msgs: list) -> list[bytes]:
    return [m.value() for m in msgs]
