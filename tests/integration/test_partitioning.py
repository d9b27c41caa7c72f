"""Invariant 6: keys go to partitions as Kafka's Java default partitioner puts them, so Java
producers and Spark jobs co-partition with logwheel's repartition topics."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from framework import Computation, Pipeline, key_by
from tests.support import REPO, UniqueJob, produce, read_topic

JARS = Path(os.environ.get("LOGWHEEL_KAFKA_JARS", REPO / "ops" / "jars" / "kafka"))


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
def test_the_backfills_key_partition_agrees_with_javas_default_partitioner():
    """The backfill places a re-keyed key's changelog and timer records by
    `backfill_task.key_partition`, on Spark workers, without producing it."""
    from framework.backfill.task import key_partition

    keys = [f"key-{i}" for i in range(300)] + ["", "ünïcödé", "a" * 200, "日本語のキー"]
    for partitions in (1, 4, 7):
        ours = [key_partition(k, partitions) for k in keys]
        assert ours == java_partitions(keys, partitions)
