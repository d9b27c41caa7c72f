"""Invariant 6: keys go to partitions as Kafka's Java default partitioner puts them, so Java
producers and Spark jobs co-partition with logwheel's repartition topics."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from framework import Computation, Pipeline, key_by
from framework.jvm.jars import kafka_jars
from framework.kafka.partitioning import key_partition
from tests.support import UniqueJob, produce, read_topic

JARS = kafka_jars()


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def pipeline_named(name: str, prefix: str) -> Pipeline:
    pipeline = Pipeline(name)
    pipeline.source(f"{prefix}in")
    pipeline.computation("sink", Nothing, inputs={f"{prefix}in": key_by("k")})
    return pipeline


def java_partitions(keys: list[str], partitions: int) -> list[int]:
    out = subprocess.run(
        ["java", "-cp", f"{JARS}/*", str(Path(__file__).parent / "java" / "Partition.java"),
         str(partitions)],
        input="\n".join(keys) + "\n", capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return [int(line) for line in out.stdout.split()]


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java for Kafka's own murmur2")
def test_repartition_topic_agrees_with_javas_default_partitioner(kafka, tmp_path):
    unique = UniqueJob(
        kafka, tmp_path, "tests.integration.test_partitioning:pipeline_named", "part"
    )
    name, prefix, pipeline = unique.name, unique.prefix, unique.pipeline
    keys = [f"key-{i}" for i in range(300)] + ["", "ünïcödé", "a" * 200]
    produce(kafka, f"{prefix}in", [(None, {"k": k}, None) for k in keys])
    job = unique.job().start()
    try:
        rekeyed = read_topic(kafka, f"{name}.sink.{prefix}in.by-key", expect=len(keys))
    finally:
        job.stop()
    ours = {m.key().decode(): m.partition() for m in rekeyed}
    assert sorted(ours) == sorted(keys)
    javas = dict(zip(keys, java_partitions(keys, pipeline["sink"].partitions), strict=True))
    assert ours == javas


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java for Kafka's own murmur2")
def test_our_murmur2_partition_agrees_with_javas_default_partitioner():
    """The backfill places a re-keyed key's changelog and timer records by
    `kafka.partitioning.key_partition`, on Spark workers, without producing it: every tail
    length, ASCII and multibyte UTF-8, empty and long keys."""
    rng = random.Random(6)
    alphabet = "abcXYZ019-_ éü€日本語🙂"
    keys = [f"key-{i}" for i in range(300)] + ["", "ünïcödé", "a" * 200, "日本語のキー"]
    keys += ["".join(rng.choice(alphabet) for _ in range(n)) for n in range(21) for _ in range(5)]
    keys += ["x" * n for n in range(1, 21)]
    for partitions in (1, 4, 7, 100):
        ours = [key_partition(k, partitions) for k in keys]
        assert ours == java_partitions(keys, partitions)
