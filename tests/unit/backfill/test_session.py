"""[spark] settings go to spark-submit in a Java properties file that reads back exactly, read
by a JVM launched with them."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from framework.backfill import session
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


class Gateway:
    """PySpark's gateway to a JVM that exits when its stdin closes (a `cat` here)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.shut = False

    def shutdown(self) -> None:
        self.shut = True


def test_a_jvm_launched_with_other_settings_is_ended_and_the_next_session_launches_its_own(
    monkeypatch,
):
    """A JVM reads its settings once, at launch (and keeps a local application's secret for
    every later one): a session with the same settings runs in it again, one with others
    (a cluster's secret) ends it and launches its own; an active session is left alone."""
    from pyspark import SparkContext

    gateway = Gateway()
    monkeypatch.setattr(SparkContext, "_gateway", gateway)
    monkeypatch.setattr(SparkContext, "_jvm", object())
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    monkeypatch.setattr(session, "_launched_with", {"conf": {"spark.authenticate": "true"}})

    assert not session._launch_for({"spark.authenticate": "true"})
    monkeypatch.setattr(SparkContext, "_active_spark_context", object())
    assert not session._launch_for({"spark.authenticate.secret": "s3cret"})
    assert gateway.proc.poll() is None and not gateway.shut

    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    assert session._launch_for({"spark.authenticate.secret": "s3cret"})
    assert gateway.shut and gateway.proc.returncode == 0
    assert SparkContext._gateway is None and SparkContext._jvm is None
    assert session._launch_for({})  # no JVM: the session launches one
