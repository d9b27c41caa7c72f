"""Kafka Streams as an external oracle: its tumbling-window count for logwheel's windowed counts,
its stream-stream join for logwheel's joins.

`run(...)` runs tests/integration/java/windowed-count's WindowedCount (Kafka Streams, the
broker's version) over a topic until it has processed the topic's end, and returns the records
it wrote: the final count of every window it closed, in logwheel's window result shape
(`window_results` reads either's). `run_join(...)` runs StreamJoin, its `join`, `leftJoin` or
`outerJoin` of two topics, likewise, in logwheel's join result shape. The jar is built once
with Maven into .logwheel/oracle/ (git-ignored), again when a source is newer than it.

Kafka Streams closes a window when its partition's stream time (the largest timestamp seen
there) reaches end + grace: a test sends, per input partition, a record late enough to close
the windows it compares, and leaves that record's own window out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from framework.kafka import topic_ends
from framework.kafka.config import consumer_config
from framework.kafka.topic_ends import Ends
from tests.support import REPO, maven_classpath, unique_name

PROJECT = REPO / "tests" / "integration" / "java" / "windowed-count"
JAR = REPO / ".logwheel" / "oracle" / "windowed-count" / "windowed-count-1.jar"
NEEDS_JAVA = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("mvn") is None,
    reason="the oracle is Kafka Streams: needs Java and Maven",
)
"""The mark of a test that runs the oracle."""


class WindowCount(NamedTuple):
    """One window's result: its key, [start, end) in ms, its count."""

    key: str
    start: int
    end: int
    count: int


def command(main: str = "WindowedCount") -> list[str]:
    """The java command (less its arguments) of the oracle program `main`, built first if need
    be."""
    classpath = maven_classpath(PROJECT, JAR)
    logging = "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"
    return ["java", logging, "-cp", classpath, f"logwheel.oracle.{main}"]


def window_results(msgs: Iterable) -> list[WindowCount]:
    """The window results of records read with `read_topic` (logwheel's or the oracle's), in
    the order read."""
    results = []
    for m in msgs:
        value = json.loads(m.value())
        results.append(WindowCount(value["key"], value["start"], value["end"], value["value"]))
    return results


def run(
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    workdir: Path,
    *,
    size_ms: int,
    grace_ms: int,
    guarantee: str = "exactly_once_v2",
    idle_ms: int = 1_000,
    timeout: float = 180,
) -> list[Message]:
    """Run the oracle over `input_topic` from its start, writing `output_topic` (which must
    exist), until its committed offsets have stayed at the input's end for `idle_ms`; returns
    every record it wrote (`window_results` reads them). Its state and log go in `workdir`."""
    args = [bootstrap, input_topic, output_topic, unique_name("oracle"), str(size_ms)]
    args += [str(grace_ms), guarantee, str(workdir / "state"), str(idle_ms)]
    return _run("WindowedCount", args, output_topic, workdir, timeout)


def run_join(
    bootstrap: str,
    left: str,
    right: str,
    outputs: dict[str, str],
    workdir: Path,
    *,
    before_ms: int,
    after_ms: int,
    grace_ms: int,
    guarantee: str = "exactly_once_v2",
    idle_ms: int = 1_000,
    timeout: float = 180,
) -> dict[str, list[Message]]:
    """Run Kafka Streams' joins of topics `left` and `right` from their start, one per entry
    of `outputs` (how — inner, left or outer — -> its output topic, which must exist), in one
    application, until its committed offsets have stayed at both inputs' ends for `idle_ms`;
    returns, per how, every record it wrote, values `{"key", "left", "right"}` as logwheel's.
    Its state and log go in `workdir`."""
    hows = ",".join(f"{how}={topic}" for how, topic in outputs.items())
    args = [bootstrap, left, right, hows, unique_name("oracle"), str(before_ms)]
    args += [str(after_ms), str(grace_ms), guarantee, str(workdir / "state"), str(idle_ms)]
    _run("StreamJoin", args, None, workdir, timeout)
    return {how: read_to_end(bootstrap, topic) for how, topic in outputs.items()}


def _run(main: str, args: list[str], output_topic: str | None, workdir: Path, timeout: float):
    """Run oracle program `main` with `args` to its end, then read everything it wrote to
    `output_topic` (if one is named)."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{main}.log"
    java = command(main)  # built before the clock starts
    with open(log, "wb") as out:
        try:
            code = subprocess.run(
                java + args, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            code = None
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise AssertionError(f"{main} ended with {code} (None: timed out):\n{tail}")
    return None if output_topic is None else read_to_end(args[0], output_topic)


def read_to_end(bootstrap: str, topic: str, timeout: float = 60) -> list[Message]:
    """Every committed record of `topic`, read to where each partition ends now (for a topic
    no one writes any more)."""
    consumer = Consumer(consumer_config(bootstrap, reader=unique_name("reader")))
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        ends, records = Ends(consumer), []
        ends.add((topic, p) for p in partitions)
        topic_ends.read_to_end(ends, records.extend, timeout=timeout)
        return records
    finally:
        consumer.close()
