"""When a new broker can serve a job: not when it first answers metadata, but once it is
registered and its group and transaction coordinators are loaded.

On a brand-new broker `__consumer_offsets` and `__transaction_state` do not exist yet; the
first FindCoordinator creates them, and until their partitions are loaded an OffsetFetch meets
NOT_COORDINATOR, which librdkafka may not retry (confluentinc/librdkafka#5586): a consumer of a
new group that `assign()`s partitions then reads nothing. So the broker is called ready only
after every partition of `__consumer_offsets` has answered an OffsetFetch and one transactional
producer has completed `init_transactions`.
"""

from __future__ import annotations

import logging
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

PROBE = "logwheel-ready"
QUIET = logging.getLogger("logwheel.broker.librdkafka")
"""Where the broker's probing clients log: nowhere (a broker still starting refuses them)."""
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def registered_brokers(bootstrap: str, settings: dict[str, str]) -> set[int]:
    """The node ids of the brokers registered (unfenced) in the metadata that `bootstrap`
    serves; none while nothing answers there."""
    admin = AdminClient({**settings, "bootstrap.servers": bootstrap, "logger": QUIET})
    try:
        return set(admin.list_topics(timeout=2).brokers)
    except KafkaException:
        return set()


def java_hash(text: str) -> int:
    """Java's `String.hashCode` (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(group: str, partitions: int) -> int:
    """The `__consumer_offsets` partition whose leader coordinates `group` (Kafka's
    `Utils.abs(groupId.hashCode()) % partitions`)."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def probe_groups(partitions: int) -> list[str]:
    """One group id coordinated by each partition of `__consumer_offsets`."""
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < partitions:
        group = f"{PROBE}-{i}"
        chosen.setdefault(coordinator_partition(group, partitions), group)
        i += 1
    return [chosen[p] for p in range(partitions)]


def offsets_served(bootstrap: str, settings: dict, group: str, timeout: float) -> bool:
    """Whether an OffsetFetch of `group` answers without error."""
    consumer = Consumer(
        {
            **settings,
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "logger": QUIET,
        }
    )
    try:
        consumer.committed([TopicPartition(PROBE, 0)], timeout=timeout)
        return True
    except KafkaException:
        return False
    finally:
        consumer.close()


def transactions_served(bootstrap: str, settings: dict, timeout: float) -> bool:
    """Whether a transactional producer completes `init_transactions`."""
    producer = Producer(
        {
            **settings,
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{PROBE}-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 10_000,
            "logger": QUIET,
        }
    )
    try:
        producer.init_transactions(timeout)
        return True
    except KafkaException:
        return False


def coordinators_serve(
    bootstrap: str, settings: dict, offsets_partitions: int, deadline: float
) -> bool:
    """Wait until the group coordinator serves every `__consumer_offsets` partition and the
    transaction coordinator serves a producer; False if `deadline` (monotonic) passes first."""
    pending = probe_groups(offsets_partitions)
    transactions = False
    while time.monotonic() < deadline:
        left = max(0.5, min(5.0, deadline - time.monotonic()))
        pending = [g for g in pending if not offsets_served(bootstrap, settings, g, left)]
        if not transactions:
            transactions = transactions_served(bootstrap, settings, left)
        if not pending and transactions:
            return True
        time.sleep(0.2)
    return False
