"""logwheel's joins against an external oracle: Kafka Streams' stream-stream `leftJoin` and
`outerJoin` (JoinWindows.ofTimeDifferenceAndGrace with before/after, the emission fixed by
KAFKA-10847; tests/integration/kafka_streams_oracle.py) give, over known records, what a
brute-force join in Python gives — so a disagreement with logwheel is logwheel's — and
`pipeline.join(..., how="left"|"outer")` run by `logwheel run` gives the oracle's, over the same
topics (one run of the oracle for both)."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from typing import NamedTuple

import pytest
from confluent_kafka import Message

from framework.kafka.partitioning import key_partition
from framework.kafka.topics import create_topics as create_pipeline_topics
from tests.conftest import create_topics
from tests.integration import kafka_streams_oracle as oracle
from tests.support import (
    import_job,
    job_source,
    produce,
    read_topic,
    start_job,
    unique_name,
    write_job,
)

pytestmark = [
    pytest.mark.timeout(600),  # the first run builds the oracle with Maven
    oracle.NEEDS_JAVA,
]

BEFORE_MS, AFTER_MS, GRACE_MS, PARTITIONS = 100, 300, 200, 2
HOWS = ("left", "outer")
KEYS = ["ann", "bob", "cy", "dee"]

Sent = tuple[str, str, int, int]
"""(side "l" or "r", key, timestamp in ms, n: the record's number, unique)"""


def input_records(base: int, seed: int = 39) -> list[Sent]:
    """Orders and payments over 4 s from `base`, in send order: by timestamp, but for a
    straggler every tenth record, sent up to 150 ms after its time (within the grace, so
    neither side's stream time makes it late); a few payments exactly on a window's edge."""
    rng = random.Random(seed)
    records: list[tuple[int, str, str, int]] = []
    for n in range(70):
        side, key, ts = rng.choice("lr"), rng.choice(KEYS), base + rng.randrange(4_000)
        records.append((ts, side, key, n))
    for n, (ts, key) in enumerate([(base + 500, "ann"), (base + 1_500, "bob")], start=100):
        records.append((ts, "l", key, n))
        records.append((ts - BEFORE_MS, "r", key, n + 10))  # both edges are inclusive
        records.append((ts + AFTER_MS, "r", key, n + 20))
    records.sort()
    sent = [(side, key, ts, n) for ts, side, key, n in records]
    for i in range(5, len(sent), 10):  # a straggler: sent after what came up to 150 ms later
        late = sent.pop(i)
        at = i
        while at < len(sent) and sent[at][2] <= late[2] + 150:
            at += 1
        sent.insert(at, late)
    return sent


def flush_records(base: int) -> list[Sent]:
    """One record per partition of each side, stamped past every compared window's close: its
    own window never closes, and the two sides' keys differ, so it never joins."""
    ts = base + 4_000 + AFTER_MS + BEFORE_MS + GRACE_MS + 1_000
    records = []
    for side in "lr":
        keys = {
            key_partition(f"flush-{side}{i}", PARTITIONS): f"flush-{side}{i}" for i in range(50)
        }
        records += [(side, keys[p], ts, -1) for p in range(PARTITIONS)]
    return records


def brute_force(records: list[Sent], how: str) -> Counter:
    """The join by definition: every left and right record of a key with t_l - BEFORE_MS <=
    t_r <= t_l + AFTER_MS, stamped max(t_l, t_r); a record no partner matched, alone, stamped
    with its own time (left ones for "left", both sides' for "outer")."""
    lefts = [r for r in records if r[0] == "l"]
    rights = [r for r in records if r[0] == "r"]
    out, matched = Counter(), set()
    for _, key, tl, nl in lefts:
        for _, key2, tr, nr in rights:
            if key == key2 and tl - BEFORE_MS <= tr <= tl + AFTER_MS:
                out[(key, nl, nr, max(tl, tr))] += 1
                matched |= {("l", nl), ("r", nr)}
    for side, key, ts, n in records:
        if (side, n) not in matched and (side == "l" or how == "outer"):
            out[(key, n, None, ts) if side == "l" else (key, None, n, ts)] += 1
    return out


def joined(msgs: list[Message]) -> Counter:
    """Join results (logwheel's or the oracle's) as (key, left n, right n, timestamp)."""

    def n(side):
        return None if side is None else side["n"]

    out = Counter()
    for m in msgs:
        v = json.loads(m.value())
        assert m.key().decode() == v["key"]
        out[(v["key"], n(v["left"]), n(v["right"]), m.timestamp()[1])] += 1
    return out


class Run(NamedTuple):
    """The module's input, sent once, and the oracle's one run over it."""

    left: str
    right: str
    records: list[Sent]  # the compared ones, less the flush records
    written: dict[str, list[Message]]  # the oracle's output, per how


@pytest.fixture(scope="module")
def run(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    # Kafka 4 refuses timestamps more than an hour ahead of the broker: an hour back
    base = int(time.time() * 1000) - 3_600_000
    records = input_records(base)
    left, right = unique_name("orders"), unique_name("payments")
    outputs = {how: unique_name(f"oracle-{how}") for how in HOWS}
    create_topics(kafka, [left, right], PARTITIONS)
    create_topics(kafka, list(outputs.values()))
    for side, topic in (("l", left), ("r", right)):  # the order that matters: per partition
        sent = [(key, {"n": n}, ts) for s, key, ts, n in records + flush_records(base) if s == side]
        produce(kafka, topic, sent)
    written = oracle.run_join(
        kafka,
        left,
        right,
        outputs,
        tmp_path_factory.mktemp("oracle"),
        before_ms=BEFORE_MS,
        after_ms=AFTER_MS,
        grace_ms=GRACE_MS,
    )
    return Run(left, right, records, written)


@pytest.mark.parametrize("how", HOWS)
def test_kafka_streams_joins_as_a_brute_force_join(run: Run, how: str) -> None:
    assert joined(run.written[how]) == brute_force(run.records, how)


JOB = """
from framework import BoundedOutOfOrderness, Pipeline

pipeline = Pipeline(NAME, partitions=PARTITIONS)
pipeline.source(LEFT, watermark=BoundedOutOfOrderness(ms=0))
pipeline.source(RIGHT, watermark=BoundedOutOfOrderness(ms=0))
for how in ("left", "outer"):
    pipeline.join(
        how, left=LEFT, right=RIGHT, inputs={LEFT: None, RIGHT: None}, before_ms=BEFORE_MS,
        after_ms=AFTER_MS, grace_ms=GRACE_MS, how=how, output=NAME + "-" + how,
        on_late="dead_letter",
    )
"""
"""logwheel's side: the same joins, over the same topics. Its watermark is, per partition, the
smaller of the two inputs' largest timestamps (Kafka Streams' stream time is the larger): no
record comes later than the grace behind either, so both take every record, and once the flush
records passed every window both have produced every result."""


def test_logwheel_joins_as_kafka_streams_does(run: Run, kafka: str, tmp_path) -> None:
    name = unique_name("joins")
    constants = dict(NAME=name, LEFT=run.left, RIGHT=run.right, PARTITIONS=PARTITIONS)
    constants |= dict(BEFORE_MS=BEFORE_MS, AFTER_MS=AFTER_MS, GRACE_MS=GRACE_MS)
    module = write_job(tmp_path, name.replace("-", "_"), job_source(JOB, **constants))
    create_pipeline_topics(kafka, import_job(tmp_path, module).pipeline)
    expected = {how: joined(run.written[how]) for how in HOWS}

    job = start_job(tmp_path, module, kafka, computations=len(HOWS))
    try:
        written = {
            how: read_topic(
                kafka, f"{name}-{how}", expect=sum(expected[how].values()), timeout=120, to_end=True
            )
            for how in HOWS
        }
        dead = read_topic(kafka, f"{name}.outer.dlq", to_end=True)
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    for how in HOWS:
        assert joined(written[how]) == expected[how], how
    assert dead == []
