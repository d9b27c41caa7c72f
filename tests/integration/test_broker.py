"""The broker does what logwheel relies on: transactions, compaction, durable restarts.

Real Kafka, no mocks. The first two use the session's broker (`kafka`); the restart test drives
the `logwheel broker` CLI on a broker of its own, so the shared one keeps running.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.jvm.process import any_free_port

REPO = Path(__file__).resolve().parents[2]


def _consumer(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )


def _read_all(bootstrap: str, topic: str, isolation: str = "read_committed") -> list:
    """Every record of partition 0 up to the current high watermark, as (key, value) pairs of
    str (value None for a tombstone). A read_committed reader gets there only once the
    transaction markers are written, which happens after `commit_transaction` returns."""
    partition = TopicPartition(topic, 0)
    probe = _consumer(bootstrap, topic)
    try:
        end = probe.get_watermark_offsets(partition, timeout=10, cached=False)[1]
    finally:
        probe.close()
    consumer = _consumer(bootstrap, topic, isolation)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records, deadline = [], time.monotonic() + 30
        while end > 0 and consumer.position([partition])[0].offset < end:
            assert time.monotonic() < deadline, f"could not read {topic} to offset {end}"
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            value = message.value()
            records.append((message.key().decode(), value.decode() if value is not None else None))
        return records
    finally:
        consumer.close()


def test_read_committed_hides_aborted_transactions(kafka, create_topic):
    topic = create_topic(prefix="txn")
    producer = Producer({"bootstrap.servers": kafka, "transactional.id": f"{topic}-producer"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key="k", value=f"aborted-{i}")
    producer.flush(30)  # into the log: abort_transaction would purge unsent records instead
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key="k", value=f"committed-{i}")
    producer.commit_transaction(30)

    committed = [value for _, value in _read_all(kafka, topic)]
    assert committed == ["committed-0", "committed-1", "committed-2"]
    everything = [value for _, value in _read_all(kafka, topic, "read_uncommitted")]
    assert everything[:3] == ["aborted-0", "aborted-1", "aborted-2"]  # they are in the log


def test_compaction_keeps_the_latest_value_per_key_and_tombstones_remove(kafka, create_topic):
    config = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100",
    }
    topic = create_topic(prefix="compact", config=config)
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, key="a", value=f"a{i}")
    producer.produce(topic, key="b", value="b0")
    producer.produce(topic, key="gone", value="g0")
    producer.produce(topic, key="gone", value=None)  # tombstone
    producer.flush(10)

    assert len(_read_all(kafka, topic)) == 8  # nothing compacts before the segment rolls

    deadline = time.monotonic() + 60
    while True:
        time.sleep(0.3)  # a segment rolls only when a record arrives after segment.ms
        producer.produce(topic, key="filler", value=str(time.monotonic()))
        producer.flush(10)
        records = [r for r in _read_all(kafka, topic) if r[0] != "filler"]
        # the tombstone itself goes in a later pass, once delete.retention.ms has passed
        if records == [("a", "a4"), ("b", "b0")]:
            break
        assert time.monotonic() < deadline, f"not compacted within 60 s: {records}"


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "framework.cli", "broker", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_data_survives_stop_and_start_through_the_cli(tmp_path):
    """Also: the first start (of a fresh `LOGWHEEL_HOME`) makes the class archive, and the
    restarted broker's JVM maps it (framework/jvm/class_archive.py)."""
    port = any_free_port()
    env = {**os.environ, "LOGWHEEL_BROKER_DIR": str(tmp_path / "broker")}
    env["LOGWHEEL_BROKER_PORT"] = str(port)
    env["LOGWHEEL_HOME"] = str(tmp_path / "home")
    try:
        first = _cli(env, "start")
        assert first.returncode == 0, first.stderr
        lines = first.stdout.strip().splitlines()
        assert lines[-1] == f"127.0.0.1:{port}"
        assert re.search(r"ready in \d+\.\ds", first.stdout), first.stdout
        bootstrap = lines[-1]
        archives = list((tmp_path / "home" / "cds").glob("kafka-*.jsa"))
        assert len(archives) == 1, list((tmp_path / "home" / "cds").iterdir())

        again = _cli(env, "start")
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip().splitlines()[-1] == bootstrap
        assert "already running" in again.stdout
        assert _cli(env, "status").returncode == 0

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("durable", 1, 1)])["durable"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("durable", key=f"k{i}", value=f"v{i}")
        assert producer.flush(10) == 0

        stopped = _cli(env, "stop")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert _cli(env, "status").returncode == 3

        restarted = _cli(env, "start")
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.strip().splitlines()[-1] == bootstrap
        assert _read_all(bootstrap, "durable") == [(f"k{i}", f"v{i}") for i in range(10)]
        pid = (tmp_path / "broker" / "broker.pid").read_text().strip()
        assert str(archives[0]) in Path(f"/proc/{pid}/maps").read_text(), "archive not mapped"
    finally:
        _cli(env, "stop")
