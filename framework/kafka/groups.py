"""Consumer groups as logwheel uses them: what a commit of offsets carries, refusing to move a
group's offsets or write its state while the group has live members, and moving them in one
transaction with records (a backfill's and a rescale's last step)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.clock import now_ms
from framework.core.pipeline import ComputationSpec, PipelineError
from framework.errors import Rejoin
from framework.kafka.config import consumer_config, producer_config
from framework.kafka.errors import Unreachable, reaching_kafka


def refuse_live_members(admin: AdminClient, spec: ComputationSpec, then: str = "reset") -> None:
    """A configuration error naming the fix while the computation's group has live members:
    moving its offsets or writing its state under running instances would race them."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with reaching_kafka():
                futures = admin.describe_consumer_groups([spec.group], request_timeout=20)
                group = futures[spec.group].result(30)
            break
        except Unreachable:  # a coordinator still loading or moving, a loaded broker
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    if group.members:
        raise PipelineError(
            f"{spec.group} has {len(group.members)} live member(s): stop every `logwheel run` "
            f"of it and wait out the session timeout (10 s), then {then}"
        )


def starts(consumer: Consumer, tps: list[TopicPartition], timeout: float) -> dict:
    """Where each of `tps` starts for the group: its committed offset, else the partition's
    start. `Rejoin` if the group coordinator cannot say (it moved, or the broker restarts):
    raised from a rebalance callback, the client's own error left `poll` as a KafkaError no
    `except` can catch."""
    try:
        found = {}
        for c in consumer.committed(tps, timeout):
            offset = c.offset
            if offset < 0:
                offset, _ = consumer.get_watermark_offsets(
                    TopicPartition(c.topic, c.partition), timeout
                )
            found[(c.topic, c.partition)] = offset if offset >= 0 else OFFSET_BEGINNING
    except KafkaException as error:
        names = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in tps)
        raise Rejoin(f"reading where {names} stands: committed offsets unknown: {error}") from None
    return found


def commit_metadata(instance: str) -> str:
    """What a commit of input offsets carries for `logwheel status`: when, and by whom."""
    return json.dumps({"committed_at": now_ms(), "instance": instance})


def member_client_id(standby: int) -> str:
    """The `client.id` of a computation's group member: it says how many standby replicas the
    member keeps, so `logwheel ui` can tell from the group which instances hold which."""
    return f"logwheel-standby-{standby}"


def standby_count(client_id: str | None) -> int:
    """What `member_client_id` encoded (0 for a member that says nothing)."""
    head, _, n = (client_id or "").rpartition("-")
    return int(n) if head == "logwheel-standby" and n.isdigit() else 0


def standby_partitions(owned: Iterable[int], standby: int, count: int) -> set[int]:
    """The partitions a member owning `owned` (of `count`) keeps warm replicas of: the
    `standby` partitions after each owned one, modulo the count, that it does not own."""
    mine = set(owned)
    return {(p + k) % count for p in mine for k in range(1, standby + 1)} - mine


def commit_with_offsets(
    bootstrap: str,
    kafka: dict | None,
    transactional_id: str,
    group: str,
    records: list[tuple[str, bytes, bytes | None]],
    offsets: list[TopicPartition],
) -> None:
    """In one transaction of `transactional_id`: `records` (topic, key, value; partition 0 of
    single-partition topics) and `group`'s committed `offsets`."""
    producer = Producer(producer_config(bootstrap, transactional_id=transactional_id, extra=kafka))
    consumer = Consumer(consumer_config(bootstrap, reader=group, extra=kafka))
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        for topic, key, value in records:
            producer.produce(topic, value, key, partition=0)
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
    finally:
        consumer.close()
