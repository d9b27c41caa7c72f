"""Where a key's state lives: its partition of the computation's key space, placed as Kafka's
default partitioner places the key (murmur2, invariant 6: the same for a re-keyed input, whose
`.by-key` topic logwheel's producer writes with that partitioner, and for an input read by its
Kafka key, which a Java producer or one set to `murmur2_random` wrote)."""

from __future__ import annotations

from framework.kafka.partitioning import key_partition


def partition_of(key: str, partitions: int) -> int:
    """The partition of the computation's key space that holds `key`'s state."""
    return key_partition(key, partitions)
