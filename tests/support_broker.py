"""Helpers for tests on a broker of their own, started fresh."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def first_group_reads(bootstrap: str) -> int:
    """Ten records written in a transaction to a new two-partition topic of a broker just
    started; how many of them a consumer of a new group, assigning both partitions
    read_committed from the earliest offset, sees within 20 s (all ten: the broker was ready
    for its first group when its start returned; tests/integration/test_broker_ready.py)."""
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
