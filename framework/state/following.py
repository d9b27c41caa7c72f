"""Following table topics into local replicas with one consumer: read partitions to the end
offsets the broker reports now, and apply what arrives later — the one way both kinds of
table replica (co-partitioned, framework/state/tables.py; global,
framework/state/global_tables.py) keep up with their topics.

A replica holds some partitions of one topic and keeps, with its data, the next offset it
will read of each (`positions`); `apply(msgs, positions)` writes a batch of that topic's
records and the new positions together (a position may move with no record: past a
transaction's marker)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from confluent_kafka import Consumer, Message

from framework.kafka.topic_ends import Ends, read_to_end, records

SYNC_TIMEOUT_S = 30

Partition = tuple[str, int]


class Replica(Protocol):
    positions: dict[int, int]  # partition -> the next offset to read

    def apply(self, msgs: list[Message], positions: dict[int, int]) -> None: ...


class Follower:
    """The replicas fed by one consumer, by (topic, partition)."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.replicas: dict[Partition, Replica] = {}

    def sync(self, partitions: Iterable[Partition]) -> None:
        """Read `partitions` at least to the end offsets the broker reports now
        (read_committed: the last stable offset); `Unreachable` after SYNC_TIMEOUT_S."""
        wanted = [tp for tp in partitions if tp in self.replicas]
        ends = Ends(self.consumer)
        ends.add(wanted, {tp: self.replicas[tp].positions[tp[1]] for tp in wanted})
        read_to_end(ends, self.apply, timeout=SYNC_TIMEOUT_S, batch=1000)
        for (topic, p), end in ends.ends.items():  # past transaction markers no record reports
            replica = self.replicas[(topic, p)]
            if replica.positions[p] < end:
                replica.apply([], {p: end})

    def step(self, timeout: float = 0.0) -> None:
        """Apply what has arrived."""
        self.apply(records(self.consumer.consume(1000, timeout)))

    def apply(self, msgs: list[Message]) -> None:
        """Hand each replica its records of the batch, with its partitions' new positions."""
        batches: dict[int, tuple[Replica, list[Message], dict[int, int]]] = {}
        for msg in msgs:
            replica = self.replicas.get((msg.topic(), msg.partition()))
            if replica is not None:
                _, kept, positions = batches.setdefault(id(replica), (replica, [], {}))
                kept.append(msg)
                positions[msg.partition()] = msg.offset() + 1
        for replica, kept, positions in batches.values():
            replica.apply(kept, positions)
