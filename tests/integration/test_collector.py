"""The collector's calls that serve delivery reports, when a transactional producer is fenced
(a newer instance took its transactional id): confluent-kafka raises the fatal delivery error
out of them, or a SystemError caused by it."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from framework.kafka.collector import Collector


def fenced(kafka: str, topic: str, transactional_id: str) -> Collector:
    """A collector whose producer is fenced, with sends in flight that the broker refuses."""
    collector = Collector({"bootstrap.servers": kafka, "transactional.id": transactional_id})
    collector.producer.init_transactions()
    collector.producer.begin_transaction()
    collector.send(topic, None, b"before")
    collector.flush()
    Producer({"bootstrap.servers": kafka, "transactional.id": transactional_id}).init_transactions()
    for _ in range(3):
        collector.send(topic, None, b"after the fence")
    return collector


def test_a_fatal_error_inside_flush_reaches_the_commit_as_the_kafka_error(kafka, create_topic):
    topic = create_topic()
    collector = fenced(kafka, topic, f"tx-{topic}")
    with pytest.raises(KafkaException) as raised:
        collector.flush()
    assert raised.value.args[0].code() == KafkaError._FENCED and raised.value.args[0].fatal()


def test_a_fatal_error_while_polling_waits_for_the_next_flush(kafka, create_topic):
    topic = create_topic()
    collector = fenced(kafka, topic, f"tx-{topic}")
    for _ in range(50):  # until the refusals are served
        collector.poll(0.1)
    with pytest.raises(KafkaException) as raised:
        collector.flush()
    assert raised.value.args[0].code() == KafkaError._FENCED and raised.value.args[0].fatal()
