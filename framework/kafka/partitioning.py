"""Which partition Kafka's default partitioner gives a key (invariant 6): Java's
`Utils.murmur2` of the key's bytes, made positive, modulo the partition count — what Java
producers, Spark and librdkafka's `murmur2_random` all do.

confluent-kafka applies it only inside librdkafka's partitioner, while producing; the backfill
needs a key's partition on Spark workers, for changelog and timer journal records, without
producing it.
"""

from __future__ import annotations

import struct

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of `data`, as the unsigned 32 bits of Java's int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    body = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:body]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[body + 2] << 16
    if tail >= 2:
        h ^= data[body + 1] << 8
    if tail >= 1:
        h ^= data[body]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def key_partition(key: str, partitions: int) -> int:
    """The partition of `key` (UTF-8) among `partitions`."""
    return bytes_partition(key.encode(), partitions)


def bytes_partition(key: bytes, partitions: int) -> int:
    """The partition of a record whose Kafka key is `key` among `partitions`."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
