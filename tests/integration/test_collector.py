"""The collector's calls that serve delivery reports, when a transactional producer is fenced
(a newer instance took its transactional id): confluent-kafka raises the fatal delivery error
out of them, or a SystemError caused by it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from framework.errors import Retry
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


class _Retried:
    """What librdkafka reports for a retried send the broker had already written
    (DUPLICATE_SEQUENCE_NUMBER): delivered, with no offset. A real broker answers so only
    when a produce response is lost, which no test can arrange on purpose."""

    def __init__(self, topic: str, partition: int) -> None:
        self._topic, self._partition = topic, partition

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> None:
        return None


def test_a_record_delivered_without_its_offset_counts_its_partitions_end_as_written(
    kafka, create_topic
):
    """Seen in make test under load: the comparison of the missing offset raised inside the
    delivery callback, which confluent-kafka turned into a SystemError that ended the
    injector (and would end a runner)."""
    topic = create_topic()
    collector = Collector({"bootstrap.servers": kafka, "transactional.id": f"tx-{topic}"})
    collector.producer.init_transactions()
    collector.producer.begin_transaction()
    for value in (b"a", b"b", b"c"):
        collector.send(topic, None, value, partition=0)
    collector.flush()
    assert collector.written == {(topic, 0): 2}
    other = Producer({"bootstrap.servers": kafka})
    other.produce(topic, b"d", partition=0)  # at offset 3: where the retried send landed
    other.flush()
    collector._delivered(None, _Retried(topic, 0))
    collector.flush()
    assert collector.written == {(topic, 0): 3}
    collector.producer.commit_transaction()


@pytest.mark.timeout(60)
def test_a_flush_that_cannot_finish_gives_up():
    """A flush waits for every send; one whose sends can never land (here, a broker that is not
    there and a delivery timeout of forever) must give up, or the membership's loop that called it
    stops polling for good (seen in the seeded chaos run after a static member's fence)."""
    collector = Collector(
        {"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 0, "log_level": 0},
        stuck_after_s=2,
    )
    collector.send("nowhere", None, b"never delivered")
    started = time.monotonic()
    with pytest.raises(Retry, match="1 records not delivered"):
        collector.flush()
    assert time.monotonic() - started < 30
