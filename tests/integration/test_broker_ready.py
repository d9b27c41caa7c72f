"""A brand-new broker serves its first consumer group at once: `Broker.start` (and so
`logwheel broker start`) returns only once the group and transaction coordinators are loaded
(broker/readiness.py). Before, a plain consumer of a new group that assigned partitions right
after the start met NOT_COORDINATOR on its first OffsetFetch, which librdkafka did not retry
(confluentinc/librdkafka#5586), and read nothing."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.broker.embedded import Broker

STARTS = 10


def _first_group_sees_committed_records(bootstrap: str) -> int:
    """Ten records written in a transaction to a two-partition topic; how many of them a
    consumer of a new group, assigning both partitions read_committed from the earliest
    offset, sees within 20 s."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("first", 2, 1)])["first"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "first-writer"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("first", f"v{i}".encode(), f"k{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "first-group",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("first", 0), TopicPartition("first", 1)])
    seen, deadline = 0, time.monotonic() + 20
    try:
        while seen < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
    finally:
        consumer.close()
    return seen


def test_a_fresh_broker_serves_its_first_group_at_once_ten_starts_in_a_row(tmp_path, monkeypatch):
    # the JIT's first tier only: a broker that lives seconds starts on half the CPU
    monkeypatch.setenv("LOGWHEEL_BROKER_JVM_OPTS", "-XX:TieredStopAtLevel=1")
    for start in range(STARTS):
        broker = Broker(tmp_path / f"broker-{start}")
        started = broker.start(port=0, say=lambda _: None)
        try:
            assert _first_group_sees_committed_records(started.address) == 10, (
                f"start {start + 1}: the first group missed records"
            )
        finally:
            broker.stop()
