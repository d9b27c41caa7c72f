"""A key's partition, as queries route it, is where Kafka placed it: Java's default partitioner
(murmur2 of the key's bytes, made positive, mod the partition count), computed here from Kafka's
own UtilsTest vectors — for an input read by its Kafka key (the bytes a Java producer keyed the
record with) and for a re-keyed one (the bytes logwheel's murmur2 producer writes the `.by-key`
topic with); tests/integration/test_partitioning.py checks many keys against Java itself."""

from __future__ import annotations

import json

import pytest

from framework.core.declarations import Input
from framework.core.pipeline import key_by
from framework.kafka.config import producer_config
from framework.kafka.groups import standby_partitions
from framework.kafka.limits import TopicLimits
from framework.kafka.rekeying import rekey
from framework.query.placement import partition_of
from tests.unit.kafka.test_partitioning import VECTORS

COUNTS = (1, 3, 4, 12, 31)


def kafka_placement(java_murmur2: int, partitions: int) -> int:
    """`Utils.toPositive(Utils.murmur2(bytes)) % partitions`, from Java's signed result."""
    return (java_murmur2 & 0x7FFFFFFF) % partitions


@pytest.mark.parametrize(("data", "java"), VECTORS)
def test_a_kafka_keyed_inputs_key_routes_to_the_partition_kafka_placed_its_record_in(data, java):
    key = data.decode()  # ctx.key: the record's Kafka key as UTF-8
    for partitions in COUNTS:
        assert partition_of(key, partitions) == kafka_placement(java, partitions)


@pytest.mark.parametrize(("data", "java"), VECTORS)
def test_a_rekeyed_inputs_key_routes_to_the_partition_of_its_by_key_record(data, java):
    value = json.dumps({"user": data.decode()}).encode()
    target, routed, *_ = rekey(
        Input("in", key_by("user")), "p.c.in.by-key", TopicLimits(), json.loads,
        b"original-key", value, 5, None, "in/0/", 1,
    )  # fmt: skip
    assert routed == data  # the by-key record's Kafka key ...
    assert producer_config("b:9092")["partitioner"] == "murmur2_random"  # ... placed by murmur2
    for partitions in COUNTS:
        assert partition_of(data.decode(), partitions) == kafka_placement(java, partitions)


def test_standby_replicas_are_the_partitions_after_each_owned_one_but_the_owned():
    assert standby_partitions({0, 1}, 1, 4) == {2}
    assert standby_partitions({2, 3}, 1, 4) == {0}
    assert standby_partitions({3}, 2, 4) == {0, 1}
    assert standby_partitions({0, 1, 2, 3}, 3, 4) == set()
    assert standby_partitions({1}, 0, 4) == set()
