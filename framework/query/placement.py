"""Where a key's state lives: its partition of the computation's key space, placed as Kafka's
default partitioner places the key (murmur2, invariant 6: the same for a re-keyed input, whose
`.by-key` topic logwheel's producer writes with that partitioner, and for an input read by its
Kafka key, which a Java producer or one set to `murmur2_random` wrote), and the partitions an
instance keeps standby replicas of (`logwheel run --standby N`)."""

from __future__ import annotations

from collections.abc import Iterable

from framework.kafka.partitioning import key_partition


def partition_of(key: str, partitions: int) -> int:
    """The partition of the computation's key space that holds `key`'s state."""
    return key_partition(key, partitions)


def standby_partitions(owned: Iterable[int], standby: int, partitions: int) -> set[int]:
    """The partitions an instance that owns `owned` keeps warm replicas of: the `standby`
    partitions after each owned one (mod the count), but for those it owns."""
    mine = set(owned)
    return {(p + k) % partitions for p in mine for k in range(1, standby + 1)} - mine
