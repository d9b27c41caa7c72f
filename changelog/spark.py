"""A changelog (or any compacted topic) as a Spark DataFrame: the latest value per key, read
with Spark's own Kafka source (read_committed), tombstones removing their keys, values decoded
through `schemas/` (Avro by their fingerprint, else JSON) into JSON text, so other teams join
a computation's state with their own data in Spark (`F.from_json` turns it into a struct)."""

from __future__ import annotations

import json
from typing import Any

from framework.backfill.session import kafka_source
from framework.serde.codecs import default_schemas


def read_snapshot(spark: Any, topic: str, *, bootstrap: str, kafka: dict | None = None) -> Any:
    """DataFrame[key: string, value: string (JSON), partition: int, offset: long,
    timestamp: timestamp] with one row per live key of `topic`, as of its current end."""
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
    decode = F.udf(_to_json, "string")
    return latest.select(
        F.col("key").cast("string").alias("key"),
        decode(F.col("value")).alias("value"),
        "partition",
        "offset",
        "timestamp",
    )


def _to_json(raw: bytes) -> str:
    return json.dumps(default_schemas().decode_any(bytes(raw)), default=str, sort_keys=True)
