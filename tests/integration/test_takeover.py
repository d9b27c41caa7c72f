"""A task taking over a partition, where another process's transaction is still open on the
topics it reads its previous owner's marks and offsets from: a read_committed reader's end
(the last stable offset) stops at that transaction's first record, below what the previous
owner committed after it. Found by the seeded chaos run: a member that rejoined after a broker
restart published a lower watermark than it had before (invariant 4)."""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.dead_letters import ErrorPolicy
from framework.core.watermarks import Mark, encode_mark
from framework.kafka.config import client_config, consumer_config, producer_config
from framework.kafka.output import PartIO
from framework.kafka.topics import create_topics
from framework.streaming.channels import WatermarkChannels
from framework.streaming.task_manager import TaskManager
from tests.chaos import windows_job
from tests.support import unique_name, wait_for
from tests.unit.streaming.fakes import FakeChannels, FakeCollector, FakeRestorer


def _open_transaction(kafka: str, topic: str, name: str) -> Producer:
    """Another process, whose transaction holds one record in partition 0 of `topic`."""
    producer = Producer(producer_config(kafka, transactional_id=name))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"other", b"other's", partition=0)
    producer.flush(30)
    return producer


def _committed(kafka: str, topic: str, name: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer(producer_config(kafka, transactional_id=name))
    producer.init_transactions(30)
    producer.begin_transaction()
    for key, value in records:
        producer.produce(topic, value, key, partition=0)
    producer.commit_transaction(30)


def _served(kafka: str, partitions: list[TopicPartition]) -> None:
    """Wait until the partitions' leader serves them: a topic's metadata names its leader a
    moment before that broker answers for it (NOT_LEADER_FOR_PARTITION), which a runner
    retries but a test driving the task manager itself would fail on."""
    consumer = Consumer(consumer_config(kafka, reader=unique_name("probe")))

    def answered() -> bool:
        try:
            return all(consumer.get_watermark_offsets(tp, 5, cached=False) for tp in partitions)
        except KafkaException:
            return False

    try:
        wait_for(answered, 60, what=f"the leaders of {partitions}")
    finally:
        consumer.close()


def test_a_takeover_reads_its_previous_owners_mark_behind_another_process_s_transaction(
    kafka, create_topic, unique
):
    channel = create_topic(config={"cleanup.policy": "compact"})
    other = _open_transaction(kafka, channel, unique("other"))
    mark = Mark("count/task/0", 2_000, False, {}, 1_000)
    _committed(kafka, channel, unique("owner"), [(b"count/task/0", encode_mark(mark))])
    admin = AdminClient(client_config(kafka))
    channels = WatermarkChannels(Consumer(consumer_config(kafka, reader=unique("reader"))), admin)
    failed: list[BaseException] = []

    def catch_up() -> None:
        try:
            channels.catch_up(timeout=60)
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            failed.append(error)

    catching = threading.Thread(target=catch_up, daemon=True)
    try:
        channels.follow([channel])
        catching.start()
        # Reading only to the stable end, it would return at once without the owner's mark.
        catching.join(2.0)
        assert catching.is_alive(), f"caught up with another transaction open: {failed}"
        other.commit_transaction(30)  # the other's commit, not the owner's, moves the end
        catching.join(60)
        assert not catching.is_alive() and not failed, failed
        assert channels.latest(channel, "count/task/0") == mark
    finally:
        catching.join(60)
        channels.close()


def test_a_takeover_claims_its_outputs_up_to_its_previous_owners_writes(kafka, unique, tmp_path):
    prefix = unique("claim") + "-"
    pipeline = windows_job.build(prefix.rstrip("-"), prefix)
    spec = pipeline["count"]
    events, by_key = f"{prefix}events", spec.by_key(f"{prefix}events")
    create_topics(kafka, pipeline)
    _served(kafka, [TopicPartition(events, 0), TopicPartition(by_key, 0)])
    other = _open_transaction(kafka, by_key, unique("other"))
    _committed(kafka, by_key, unique("owner"), [(b"k", b"1"), (b"k", b"2")])  # offsets 1, 2

    remembered: dict = {}
    collector = FakeCollector()
    collector.remember = remembered.update
    partitions = {events: spec.partitions, by_key: spec.partitions}
    io = PartIO(pipeline, spec, collector, partitions, ErrorPolicy(spec.group, "skip"))
    consumer = Consumer(consumer_config(kafka, group=spec.group))
    admin = AdminClient(client_config(kafka))
    tasks = TaskManager(io, consumer, admin, FakeChannels(), FakeRestorer(), tmp_path)
    try:
        tasks.assigned([TopicPartition(events, 0)])
        tasks.step()
        assert [t.producer for t in tasks.running()] == [f"count/by-key/{events}/0"]
        # past the owner's last write (offset 2), though the stable end is the other's record
        assert remembered[(by_key, 0)] >= 2
    finally:
        other.abort_transaction(30)
        tasks.close()
        consumer.close()
