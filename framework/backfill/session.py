"""A Spark session that can read and write Kafka with Spark's own Kafka source: the connector's
jars (framework/jvm: LOGWHEEL_SPARK_JARS, the checkout's ops/jars/spark-kafka, else the jar
cache, fetched on first use) on its classpath, `local[*]` unless a master is given. pyspark is
the `[spark]` extra: without it, a backfill says what to install."""

from __future__ import annotations

import os
import sys
from typing import Any

from framework.errors import ConfigurationError
from framework.jvm.jars import spark_jars
from framework.kafka.config import java_settings


def spark_version() -> str:
    """The installed pyspark's version; a configuration error naming the extra without it."""
    try:
        import pyspark
    except ImportError:
        raise ConfigurationError(
            "Spark is an extra: pip install 'logwheel[spark]' (it adds pyspark) to backfill"
        ) from None
    return pyspark.__version__


QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options of the driver and executors unless `conf` names theirs: a backfill's JVMs live
for one job, where the optimising compiler's and parallel collector's threads cost more CPU
than they save (measured on 400,000 records in local[2]: about a third less CPU in all)."""


def session(master: str = "local[*]", app: str = "logwheel", conf: dict | None = None):
    """A SparkSession (pyspark is imported only here, so nothing else pays for it), its
    Python workers started once and reused by every task and job."""
    version = spark_version()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import logwheel too
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.jars", ",".join(str(j) for j in spark_jars(version)))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.extraJavaOptions", QUICK_JVM)
        .config("spark.executor.extraJavaOptions", QUICK_JVM)
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
