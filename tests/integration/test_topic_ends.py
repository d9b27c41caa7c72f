"""Reading partitions to their end (kafka/topic_ends.py), the one way restore, tables, watermark
channels, the backfill plan and ChangelogTable know they have read everything: against the
real broker, where transaction markers take offsets that no message reports."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from framework.kafka.config import consumer_config, producer_config
from framework.kafka.errors import Unreachable
from framework.kafka.topic_ends import Ends, read_to_end


def _transactional(kafka: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer(producer_config(kafka, transactional_id=f"{topic}.writer"))
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, b"k", partition=partition)
    producer.commit_transaction(30)


def _reader(kafka: str, topic: str, partitions: int) -> Consumer:
    consumer = Consumer(consumer_config(kafka, reader=f"{topic}.reader"))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return consumer


def test_every_record_before_the_end_is_read_and_the_commit_marker_ends_it(kafka, create_topic):
    topic = create_topic(partitions=2)
    _transactional(kafka, topic, [b"a", b"b", b"c"])  # offsets 0-2, the marker at 3
    consumer = _reader(kafka, topic, 2)
    try:
        # the commit returns once the broker has decided it; the marker lands just after
        deadline = time.monotonic() + 30
        while consumer.get_watermark_offsets(TopicPartition(topic, 0), 30)[1] < 4:
            assert time.monotonic() < deadline, "the commit's marker never landed"
            time.sleep(0.05)
        ends = Ends(consumer)
        ends.add([(topic, 0), (topic, 1)])
        assert ends.ends == {(topic, 0): 4, (topic, 1): 0}
        assert ends.pending == {(topic, 0)} and ends.backlog == 4  # partition 1 is empty
        seen: list[bytes] = []
        read_to_end(ends, lambda msgs: seen.extend(m.value() for m in msgs), timeout=30)
        assert seen == [b"a", b"b", b"c"] and ends.done
    finally:
        consumer.close()


def test_a_partition_read_past_its_start_needs_only_the_tail(kafka, create_topic):
    topic = create_topic()
    _transactional(kafka, topic, [b"a", b"b"])
    consumer = Consumer(consumer_config(kafka, reader=f"{topic}.reader"))
    consumer.assign([TopicPartition(topic, 0, 3)])  # past both records and their marker
    try:
        ends = Ends(consumer)
        ends.add([(topic, 0)], {(topic, 0): 3})
        assert ends.done and ends.backlog == 0
    finally:
        consumer.close()


def test_a_partition_nobody_reads_is_unreachable_after_the_timeout(kafka, create_topic):
    topic = create_topic()
    _transactional(kafka, topic, [b"a"])
    consumer = _reader(kafka, topic, 1)
    consumer.pause([TopicPartition(topic, 0)])
    try:
        ends = Ends(consumer)
        ends.add([(topic, 0)])
        with pytest.raises(Unreachable, match="not read to their end"):
            read_to_end(ends, lambda msgs: None, timeout=1)
    finally:
        consumer.close()
