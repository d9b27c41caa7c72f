"""logwheel's windowed counts against an external oracle: Kafka Streams' tumbling-window count
(tests/integration/kafka_streams_oracle.py) gives, over known records, the counts a brute-force
count in Python gives — so a disagreement with logwheel is logwheel's — and
`pipeline.windowed(..., windows.Tumbling, windows.Count(), emit="final")` run by `logwheel run`
gives the oracle's, over the same topic (one run of the oracle for both)."""

from __future__ import annotations

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

SIZE_MS, GRACE_MS, WINDOWS, PARTITIONS = 1_000, 500, 6, 2
KEYS = ["ann", "bob", "cy", "dee", "eve"]

Record = tuple[str, int]
"""(key, timestamp in ms)"""


def input_records(base: int, seed: int = 7) -> list[Record]:
    """Records over WINDOWS windows of SIZE_MS from `base` (a window start), in send order:
    by timestamp, but for a straggler per window but the last, stamped just before its window's
    end and sent after the first record of the next window, within the grace."""
    rng = random.Random(seed)
    stamps = sorted(base + rng.randrange(WINDOWS * SIZE_MS) for _ in range(80))
    records = [(rng.choice(KEYS), ts) for ts in stamps]
    for w in range(WINDOWS - 1):
        end = base + (w + 1) * SIZE_MS
        straggler = (rng.choice(KEYS), end - 1 - rng.randrange(100))
        at = 1 + next(i for i, (_, ts) in enumerate(records) if ts >= end)
        assert records[at - 1][1] < end + GRACE_MS, "the straggler would be late"
        records.insert(at, straggler)
    return records


def flush_records(base: int) -> list[Record]:
    """One record per partition, stamped so that its partition's stream time passes the last
    compared window's end + grace; its own window never closes (keys "flush-…")."""
    ts = base + WINDOWS * SIZE_MS + GRACE_MS + SIZE_MS
    keys = {key_partition(f"flush-{i}", PARTITIONS): f"flush-{i}" for i in range(50)}
    assert len(keys) == PARTITIONS
    return [(keys[p], ts) for p in range(PARTITIONS)]


def brute_force(records: list[Record]) -> set[oracle.WindowCount]:
    """Each (key, window)'s count, by definition: the window [start, start + SIZE_MS) of a
    record stamped ts starts at ts - ts % SIZE_MS."""
    counts = Counter((key, ts - ts % SIZE_MS) for key, ts in records)
    return {oracle.WindowCount(k, s, s + SIZE_MS, n) for (k, s), n in counts.items()}


def late_records(base: int) -> list[Record]:
    """Records of windows the flush records closed, more than the grace behind the flush
    records' time: late, for logwheel once it has closed those windows, and for Kafka Streams
    (behind its stream time by more than the grace)."""
    return [(KEYS[w], base + w * SIZE_MS + 10) for w in range(3)]


class Run(NamedTuple):
    """The module's input, sent once, and the oracle's one run over it."""

    source: str
    base: int  # the first window's start
    records: list[Record]  # the compared ones, less the flush records
    written: list[Message]  # the oracle's output


@pytest.fixture(scope="module")
def run(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The records of `input_records` and `flush_records` sent to a fresh topic of PARTITIONS,
    and what the oracle wrote over them (a single run of the Java program per module)."""
    # Kafka 4 refuses timestamps more than an hour ahead of the broker: an hour back
    base = (int(time.time() * 1000) - 3_600_000) // SIZE_MS * SIZE_MS
    records = input_records(base)
    source, results = unique_name("windowed-in"), unique_name("oracle-out")
    create_topics(kafka, [source], PARTITIONS)
    create_topics(kafka, [results])
    sent = [(key, {"n": i}, ts) for i, (key, ts) in enumerate(records + flush_records(base))]
    produce(kafka, source, sent)
    workdir = tmp_path_factory.mktemp("oracle")
    written = oracle.run(kafka, source, results, workdir, size_ms=SIZE_MS, grace_ms=GRACE_MS)
    return Run(source, base, records, written)


def test_kafka_streams_counts_tumbling_windows_as_a_brute_force_count(run: Run) -> None:
    found = oracle.window_results(run.written)
    assert len(found) == len(set(found)), "a window was emitted more than once"
    assert set(found) == brute_force(run.records)
    assert all(m.key().decode() == r.key for m, r in zip(run.written, found, strict=True))
    assert all(m.timestamp()[1] == r.end - 1 for m, r in zip(run.written, found, strict=True))


JOB = """
from framework import BoundedOutOfOrderness, Pipeline, windows

pipeline = Pipeline(NAME)
pipeline.source(SOURCE, watermark=BoundedOutOfOrderness(ms=0))
pipeline.windowed(
    "count",
    inputs={SOURCE: None},
    window=windows.Tumbling(size_ms=SIZE_MS, grace_ms=GRACE_MS),
    aggregate=windows.Count(),
    output=OUTPUT,
    emit="final",
    on_late="dead_letter",
    partitions=PARTITIONS,
)
"""
"""logwheel's side: the same count, over the same topic. Its watermark is each partition's
largest timestamp (a task reads one partition: the Kafka key is the window's key), which is
Kafka Streams' stream time, so both close the same windows and take the same stragglers.
Late records are dead-lettered, so that the test sees them judged."""


def test_logwheel_counts_tumbling_windows_as_kafka_streams_does(
    run: Run, kafka: str, tmp_path
) -> None:
    name = unique_name("windowed")
    output = f"{name}-counts"
    constants = dict(NAME=name, SOURCE=run.source, OUTPUT=output, SIZE_MS=SIZE_MS)
    constants |= dict(GRACE_MS=GRACE_MS, PARTITIONS=PARTITIONS)
    module = write_job(tmp_path, name.replace("-", "_"), job_source(JOB, **constants))
    create_pipeline_topics(kafka, import_job(tmp_path, module).pipeline)
    expected = oracle.window_results(run.written)

    job = start_job(tmp_path, module, kafka)
    try:
        written = read_topic(kafka, output, expect=len(expected), timeout=120)
        # sent only now: logwheel's input watermark moves between the batches it reads, so a
        # late record read in the flush records' batch would still find its window open
        late = late_records(run.base)
        produce(kafka, run.source, [(key, {"late": True}, ts) for key, ts in late])
        dead = read_topic(kafka, f"{name}.count.dlq", expect=len(late), timeout=60)
        later = read_topic(kafka, output, to_end=True)  # results past the expected ones
        written = later if len(later) > len(written) else written
    finally:
        assert job.stop() == 0, job.output()[-3000:]

    found = oracle.window_results(written)
    assert len(found) == len(set(found)), "a window was emitted more than once"
    assert set(found) == set(expected)
    assert all(m.key().decode() == r.key for m, r in zip(written, found, strict=True))
    assert all(m.timestamp()[1] == r.end - 1 for m, r in zip(written, found, strict=True))
    assert sorted((m.key().decode(), m.timestamp()[1]) for m in dead) == sorted(late)
    assert all(dict(m.headers())["logwheel.error.stage"] == b"late" for m in dead)
