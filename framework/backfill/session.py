"""A Spark session that can read and write Kafka with Spark's own Kafka source: the connector's
jars (framework/jvm: LOGWHEEL_SPARK_JARS, the checkout's ops/jars/spark-kafka, else the jar
cache, fetched on first use) on its classpath, `local[*]` unless a master is given. pyspark is
the `[spark]` extra: without it, a backfill says what to install."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from framework.backfill.authentication import authenticates, driver_settings
from framework.errors import ConfigurationError
from framework.jvm.class_archive import ClassArchive
from framework.jvm.jars import spark_jars
from framework.kafka.config import java_settings
from framework.private_files import write_private

log = logging.getLogger(__name__)


def spark_version() -> str:
    """The installed pyspark's version; a configuration error naming the extra without it."""
    try:
        import pyspark
    except ImportError:
        raise ConfigurationError(
            "Spark is an extra: pip install 'logwheel[spark]' (it adds pyspark) to backfill"
        ) from None
    return pyspark.__version__


JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""JVM options of the driver and executors unless `conf` names theirs. The serial collector:
its one thread costs less CPU than the parallel collector's on the few cores a backfill's JVM
shares with its Python workers. No optimising compiler (C1 only): a backfill's JVM runs
seconds to minutes, and most of its CPU went to C2 compiling code (10 of 21 s CPU at
1,000,000 CountWords records in local[2]); without it the same backfill took 24 instead of
32 µs CPU a record (`bench/backfill.py`, Arrow batches then unbounded in bytes)."""

ARCHIVE_ENV = "LOGWHEEL_SPARK_CLASS_ARCHIVE"
"""Set to 0, the driver neither maps nor writes a class archive (the tests: a checkout's new
virtualenv would write one per run, `framework.jvm.class_archive`)."""

ARROW_BATCH_ROWS = "100"
"""Rows in an Arrow batch (`spark.sql.execution.arrow.maxRecordsPerBatch`; Spark's default is
10,000). Spark measures a batch's bytes after every row it adds, against its bound
(`maxBytesPerBatch`, 64 MB), and measuring the headers' nested column (a list of structs)
walks the rows already in the batch: at 10,000 rows three quarters of a backfill's executor
CPU samples were there. At 1,000,000 CountWords records in local[2], a backfill took 30.2 µs CPU
a record with 1,000-row batches, 26.3 with 100, and 25.4-25.8 with no byte bound at all (so
the bound, which keeps large records from making batches of gigabytes, stays)."""


def session(master: str = "local[*]", app: str = "logwheel", conf: dict | None = None):
    """A SparkSession (pyspark is imported only here, so nothing else pays for it). `conf`
    (the `[spark]` settings, keystore passwords among them) reaches Spark in a 0600 properties
    file, never on spark-submit's command line, which `ps` shows to every local user, with
    the settings that authenticate every connection of the application (`authentication.py`):
    a master that needs a secret `conf` lacks fails here. Its Python workers are started once
    and reused by every task and job."""
    version = spark_version()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import logwheel too
    jars = [str(j) for j in spark_jars(version)]
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
    )
    conf = {**driver_settings(master, conf or {}), **(conf or {})}
    if not authenticates(conf):
        log.warning(
            "[spark] spark.authenticate = false: whoever reaches the Spark master, driver or "
            "executors of %s can run code as this user and read the Kafka and registry "
            "secrets in its tasks",
            master,
        )
    # the connector on the driver's own classpath too, so that its classes are archived
    classpath = conf.get("spark.driver.extraClassPath", os.pathsep.join(_not_in_spark(jars)))
    archive = _driver_archive(version, classpath, conf)
    driver = f"{JVM_OPTIONS} {archive.options()}".strip() if archive else JVM_OPTIONS
    defaults = {"spark.python.worker.reuse": "true", "spark.driver.extraJavaOptions": driver,
                "spark.driver.extraClassPath": classpath,
                "spark.executor.extraJavaOptions": JVM_OPTIONS,
                "spark.sql.execution.arrow.maxRecordsPerBatch": ARROW_BATCH_ROWS}  # fmt: skip
    for key, value in defaults.items():
        if key not in conf:  # the builder's settings would win over the file's
            builder = builder.config(key, value)
    launching = _launch_for(conf)
    with _properties_file(conf if launching else {}):
        spark = builder.getOrCreate()
    if launching:
        _launched_with.update(conf=dict(conf))
    jvm = getattr(spark.sparkContext._gateway, "proc", None)  # the JVM PySpark launched
    if archive is not None and jvm is not None:
        archive.keep_at_exit(jvm)
    return spark


_launched_with: dict[str, dict] = {}
"""The settings the running JVM read at its launch (`conf`), when a session launched it."""


def _launch_for(conf: dict) -> bool:
    """Whether the session about to start launches its JVM (and so reads `conf`). A JVM reads
    its settings once, at its launch, and keeps a local application's secret in its Hadoop
    credentials, where every later application in it would find it before its own: so a JVM
    an earlier session launched with other settings, now stopped, is ended here, and the new
    session launches one of its own. One with the same settings serves again; an active
    session is what the builder returns anyway."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return True
    if _launched_with.get("conf") == conf or SparkContext._active_spark_context is not None:
        return False
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:  # it exits when its stdin closes
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    SparkContext._gateway = SparkContext._jvm = None
    _launched_with.clear()
    return True


def _artifact(jar: str) -> str:
    return re.sub(r"-\d[^/]*\.jar$", "", Path(jar).name)


def _not_in_spark(jars: list[str]) -> list[str]:
    """The connector's jars whose artifact Spark's own jars lack (Spark brings its own Scala,
    lz4, snappy, ... and those must come first)."""
    import pyspark

    own = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [j for j in jars if _artifact(j) not in own]


def _driver_archive(version: str, classpath: str, conf: dict) -> ClassArchive | None:
    """The driver's class archive (not the executors': their classpath differs), one per
    Java, Spark installation, classpath and JVM options; None if turned off, if `conf` gives
    the driver's JVM options, or with no java to run (spark-class's: JAVA_HOME's, else PATH's)."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or "spark.driver.extraJavaOptions" in conf or os.environ.get(ARCHIVE_ENV) == "0":
        return None
    import pyspark

    return ClassArchive(java, "spark-driver", version, pyspark.__file__, classpath, JVM_OPTIONS)


@contextlib.contextmanager
def _properties_file(conf: dict) -> Iterator[None]:
    """While the session starts: `conf` in a 0600 file in a 0700 directory, named to
    spark-submit by `--properties-file` in PYSPARK_SUBMIT_ARGS (an environment variable, which
    only the owner can read); removed once the JVM has read it."""
    if not conf:
        yield
        return
    directory = Path(tempfile.mkdtemp(prefix="logwheel-spark-"))  # mode 0700
    path = directory / "spark.properties"
    write_private(path, properties_text(conf))
    previous = os.environ.get("PYSPARK_SUBMIT_ARGS")
    submit = previous or "pyspark-shell"
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {shlex.quote(str(path))} {submit}"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = previous
        shutil.rmtree(directory, ignore_errors=True)


def properties_text(conf: dict) -> str:
    """`conf` as a Java properties file's text."""
    return "".join(f"{_escape(k)}={_escape(_text(v))}\n" for k, v in conf.items())


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _escape(text: str) -> str:
    """Java properties escaping: backslashes, separators, comment marks, line breaks, and
    leading spaces, so a value is read back exactly."""
    out = text.replace("\\", "\\\\")
    for char, escaped in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("=", "\\="),
                          (":", "\\:"), ("#", "\\#"), ("!", "\\!")):  # fmt: skip
        out = out.replace(char, escaped)
    return "\\ " + out[1:] if out.startswith(" ") else out


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
