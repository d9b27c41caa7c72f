"""Kafka's murmur2 without a broker: the vectors of Kafka's own UtilsTest (Java's signed
ints); tests/integration/test_partitioning.py checks many more keys against Java itself."""

from __future__ import annotations

import pytest

from framework.kafka.partitioning import key_partition, murmur2

VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "java"), VECTORS)
def test_murmur2_matches_kafkas_own_vectors(data, java):
    assert murmur2(data) == java & 0xFFFFFFFF


def test_a_key_lands_in_range_and_always_in_the_same_partition():
    for partitions in (1, 3, 12):
        placed = [key_partition(f"k{i}", partitions) for i in range(200)]
        assert all(0 <= p < partitions for p in placed)
        assert placed == [key_partition(f"k{i}", partitions) for i in range(200)]
