"""Which `__consumer_offsets` partition coordinates a group, as Kafka computes it, so that the
readiness check reaches every one of them; and no broker counts as registered where none
answers."""

from __future__ import annotations

from framework.broker.readiness import (
    coordinator_partition,
    java_hash,
    probe_groups,
    registered_brokers,
)
from framework.jvm.process import any_free_port


def test_java_string_hashes_including_the_one_at_the_minimum():
    assert java_hash("") == 0
    assert java_hash("hello") == 99162322
    assert java_hash("polygenelubricants") == -(2**31)  # Kafka's Utils.abs maps it to 0
    assert java_hash("é€") == 233 * 31 + 0x20AC


def test_a_group_hashing_to_the_minimum_lands_on_partition_zero():
    assert coordinator_partition("polygenelubricants", 8) == 0


def test_the_probe_groups_cover_every_partition_once():
    groups = probe_groups(8)
    assert [coordinator_partition(g, 8) for g in groups] == list(range(8))


def test_nothing_is_registered_where_no_broker_answers():
    assert registered_brokers(f"127.0.0.1:{any_free_port()}", {}) == set()
