"""A changelog (or any compacted topic) as a Spark DataFrame: the latest value per key, read
with Spark's own Kafka source (read_committed), tombstones removing their keys, values decoded
through `schemas/` (Avro by their fingerprint, else JSON; with a Schema Registry also the
Confluent wire format, as `ChangelogTable` does) into JSON text, so other teams join a
computation's state with their own data in Spark (`F.from_json` turns it into a struct)."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from framework.backfill.session import kafka_source
from framework.kafka.registry_settings import REGISTRY_ENV, at_url
from framework.kafka.stream_codecs import any_decoder


def read_snapshot(
    spark: Any,
    topic: str,
    *,
    bootstrap: str,
    kafka: dict | None = None,
    registry: str | None = None,
) -> Any:
    """DataFrame[key: string, value: string (JSON), partition: int, offset: long,
    timestamp: timestamp] with one row per live key of `topic`, as of its current end.
    `registry`: the Schema Registry of wire-format values (else `LOGWHEEL_SCHEMA_REGISTRY`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    records = (
        kafka_source(spark, bootstrap, kafka)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .where(F.col("key").isNotNull())
    )
    newest = Window.partitionBy("key").orderBy(F.col("partition").desc(), F.col("offset").desc())
    latest = (
        records.withColumn("_rank", F.row_number().over(newest))
        .where((F.col("_rank") == 1) & F.col("value").isNotNull())
        .drop("_rank")
    )
    url = registry or os.environ.get(REGISTRY_ENV)
    _decoder(url, topic)  # a registry that does not answer fails here, not in a Spark task
    decode = F.udf(functools.partial(_to_json, url, topic), "string")
    return latest.select(
        F.col("key").cast("string").alias("key"),
        decode(F.col("value")).alias("value"),
        "partition",
        "offset",
        "timestamp",
    )


@functools.cache
def _decoder(registry: str | None, topic: str) -> Any:
    return any_decoder(at_url(registry), topic)


def _to_json(registry: str | None, topic: str, raw: bytes) -> str:
    value = _decoder(registry, topic)(bytes(raw))
    return json.dumps(value, default=str, sort_keys=True)
