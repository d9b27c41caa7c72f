"""[spark] settings go to spark-submit in a Java properties file that reads back exactly."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from framework.backfill.session import _escape, _not_in_spark, _properties_file


def _java_unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            nxt = text[i + 1]
            out.append({"n": "\n", "r": "\r", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def test_values_are_escaped_for_java_properties():
    for value in ["pa=ss:w#rd!", " lead", "back\\slash", "line\nbreak", "ünï"]:
        assert _java_unescape(_escape(value)) == value


def test_the_file_is_private_named_in_the_environment_and_removed(monkeypatch):
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    with _properties_file({"spark.ssl.keyStorePassword": "s3cret", "spark.x": True}):
        args = os.environ["PYSPARK_SUBMIT_ARGS"].split()
        assert args[0] == "--properties-file" and args[-1] == "pyspark-shell"
        path = Path(args[1])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert path.read_text() == "spark.ssl.keyStorePassword=s3cret\nspark.x=true\n"
    assert not path.exists() and "PYSPARK_SUBMIT_ARGS" not in os.environ


def test_the_driver_classpath_gets_only_the_connector_jars_spark_lacks():
    """Spark's own Scala, lz4, ... come first: the connector's break it (NoSuchMethodError)."""
    jars = ["/j/scala-library-2.13.15.jar", "/j/lz4-java-1.10.1.jar", "/j/kafka-clients-3.9.2.jar",
            "/j/spark-sql-kafka-0-10_2.13-4.2.0.jar"]  # fmt: skip
    assert _not_in_spark(jars) == jars[2:]
