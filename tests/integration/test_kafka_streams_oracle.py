"""The external oracle of logwheel's windowed counts: Kafka Streams' tumbling-window count
(tests/integration/kafka_streams_oracle.py) gives, over known records, the counts a brute-force
count in Python gives — so a disagreement with logwheel is logwheel's."""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter

import pytest

from framework.kafka.partitioning import key_partition
from tests.integration import kafka_streams_oracle as oracle
from tests.support import produce

pytestmark = [
    pytest.mark.timeout(600),  # the first run builds the oracle with Maven
    pytest.mark.skipif(
        shutil.which("java") is None or shutil.which("mvn") is None,
        reason="the oracle is Kafka Streams: needs Java and Maven",
    ),
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


def test_kafka_streams_counts_tumbling_windows_as_a_brute_force_count(
    kafka, create_topic, tmp_path
):
    # Kafka 4 refuses timestamps more than an hour ahead of the broker: an hour back
    base = (int(time.time() * 1000) - 3_600_000) // SIZE_MS * SIZE_MS
    records = input_records(base)
    source, results = create_topic(partitions=PARTITIONS), create_topic(prefix="oracle")
    sent = [(key, {"n": i}, ts) for i, (key, ts) in enumerate(records + flush_records(base))]
    produce(kafka, source, sent)

    written = oracle.run(
        kafka, source, results, tmp_path / "oracle", size_ms=SIZE_MS, grace_ms=GRACE_MS
    )

    found = oracle.window_results(written)
    assert len(found) == len(set(found)), "a window was emitted more than once"
    assert set(found) == brute_force(records)
    assert all(m.key().decode() == r.key for m, r in zip(written, found, strict=True))
    assert all(m.timestamp()[1] == r.end - 1 for m, r in zip(written, found, strict=True))
