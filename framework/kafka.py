"""Client configuration for every Kafka client logwheel makes, in one place.

Defaults are chosen for low latency on small batches and quick failover; anything in the user's
`[kafka]` config table passes through and wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

TRANSACTION_TIMEOUT_MS = 10_000
"""Short, as in Kafka Streams under exactly-once: a transaction left open by a killed process
blocks read_committed readers until the broker aborts it after this long."""


def client_config(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    config.update(extra or {})
    return config


def producer_config(
    bootstrap: str,
    *,
    transactional_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Idempotent producer with Java's murmur2 partitioner (invariant 6)."""
    config = {
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "linger.ms": 1,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 1_000_000,
        "compression.type": "lz4",
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
        config["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
        # A commit that follows the previous one closely often meets CONCURRENT_TRANSACTIONS
        # while the broker still writes the markers; the default 100 ms retry backoff would
        # then be most of the commit's latency.
        config["retry.backoff.ms"] = 10
    config.update(extra or {})
    return config


def consumer_config(
    bootstrap: str,
    *,
    group: str | None = None,
    instance: str | None = None,
    assignor: str = "cooperative-sticky",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """read_committed consumer that never commits by itself: commits belong to the runner.

    `instance` makes the member static (KIP-345): a restarted process takes its partitions
    back at once instead of waiting out its killed predecessor's session."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 20,
        "fetch.queue.backoff.ms": 10,
    }
    if group is None:
        config["group.id"] = "logwheel-unused"  # librdkafka wants one even for assign()
        config["enable.partition.eof"] = True
    else:
        config.update(
            {
                "group.id": group,
                "partition.assignment.strategy": assignor,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
                "max.poll.interval.ms": 120_000,
            }
        )
        if instance is not None:
            config["group.instance.id"] = instance
    config.update(extra or {})
    return config


_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._DESTROY_BROKER,  # a broker's connection torn down while it restarts
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.BROKER_NOT_AVAILABLE,
}


def unreachable(error: BaseException) -> bool:
    """Whether `error` says the cluster could not be reached or was between leaders (a broker
    down or restarting): that passes, so the caller waits and tries again, where a
    configuration error or a fenced producer would not."""
    if isinstance(error, TimeoutError):
        return True
    if not isinstance(error, KafkaException) or not error.args:
        return False
    err = error.args[0]
    return isinstance(err, KafkaError) and not err.fatal() and err.code() in _UNREACHABLE
