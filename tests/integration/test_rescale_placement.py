"""Property: `logwheel rescale` places every key where Kafka's Java producer would, for random
keys and partition counts (`kafka.partitioning.bytes_partition`, which the rescale's Spark tasks
and its verification both call), against Kafka's own `Utils.murmur2` run by Java: 2,000 cases
of a fresh seed each run (printed when it fails), in one JVM."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from framework.jvm.jars import kafka_jars
from framework.kafka.partitioning import bytes_partition

HELPER = Path(__file__).parent / "java" / "PartitionOf.java"
ALPHABETS = ["abcxyz0189-_.:/", "éüßø€", "日本語キー", "🙂🚀𝄞", "\t \x00\x7f"]


def random_key(rng: random.Random) -> str:
    """Empty to 64 characters, ASCII to 4-byte UTF-8, every tail length of murmur2's blocks."""
    alphabet = "".join(rng.sample(ALPHABETS, rng.randint(1, len(ALPHABETS))))
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 64)))


def javas(cases: list[tuple[str, int]]) -> list[int]:
    out = subprocess.run(
        ["java", "-cp", f"{kafka_jars()}/*", str(HELPER)],
        input="".join(f"{n} {key}\n" for key, n in cases),
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return [int(line) for line in out.stdout.split()]


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java for Kafka's own murmur2")
def test_rescale_places_random_keys_as_kafkas_java_partitioner():
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    counts = [1, 2, 3, 8, 2**31 - 1]
    cases = [(random_key(rng), rng.choice(counts + [rng.randint(1, 10_000)])) for _ in range(2000)]
    ours = [bytes_partition(key.encode(), n) for key, n in cases]
    assert ours == javas(cases), f"seed {seed}"
