"""A Spark session that can read and write Kafka with Spark's own Kafka source: the connector's
jars that `make jars` fetches (ops/jars/spark-kafka, or LOGWHEEL_SPARK_JARS) on its classpath,
`local[*]` unless a master is given."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from framework.errors import ConfigurationError
from framework.kafka.config import java_settings

JARS_ENV = "LOGWHEEL_SPARK_JARS"


def connector_jars() -> list[Path]:
    """The Kafka connector's jars; a configuration error naming the fix if there are none."""
    default = Path(__file__).resolve().parents[2] / "ops" / "jars" / "spark-kafka"
    directory = Path(os.environ.get(JARS_ENV) or default)
    jars = sorted(directory.glob("*.jar"))
    if not jars:
        raise ConfigurationError(
            f"no Spark Kafka connector jars in {directory}: run `make jars` (or set {JARS_ENV})"
        )
    return jars


def session(master: str = "local[*]", app: str = "logwheel", conf: dict | None = None):
    """A SparkSession (pyspark is imported only here, so nothing else pays for it)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import logwheel too
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.jars", ",".join(str(j) for j in connector_jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def kafka_source(spark: Any, bootstrap: str, kafka: dict | None = None) -> Any:
    """Spark's own Kafka source (a DataFrameReader to add `subscribe`/`assign` and offsets
    to), reading read_committed with the `[kafka]` settings as the Java client takes them."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
    )
    for key, value in java_settings(kafka or {}).items():
        reader = reader.option(f"kafka.{key}", value)
    return reader
