"""Owners and standby replicas, as the dashboard reads them from a computation's group."""

from __future__ import annotations

from framework import Computation, Pipeline
from framework.kafka.groups import member_client_id, standby_count, standby_partitions
from framework.ops.members import Member, owners, standbys


def test_a_member_s_client_id_says_how_many_standbys_it_keeps():
    assert standby_count(member_client_id(2)) == 2
    assert standby_count(member_client_id(0)) == 0
    assert standby_count("rdkafka") == 0 and standby_count(None) == 0
    assert standby_count("logwheel-standby-x") == 0


def test_the_standbys_are_the_partitions_after_each_owned_one_not_owned():
    assert standby_partitions({0}, 1, 4) == {1}
    assert standby_partitions({3}, 2, 4) == {0, 1}
    assert standby_partitions({0, 1}, 1, 2) == set()
    assert standby_partitions(set(), 3, 4) == set()


def test_standbys_and_owners_per_partition():
    p = Pipeline("p", partitions=4)
    p.source("in")
    p.computation("c", Computation, inputs={"in": None})
    members = [
        Member("p.c.a", member_client_id(1), (("in", 0), ("in", 1))),
        Member("p.c.b", member_client_id(1), (("in", 2), ("in", 3))),
        Member("p.c.old", "rdkafka", ()),  # a member of an earlier version: none
    ]
    assert standbys(p["c"], members) == {2: ["p.c.a"], 0: ["p.c.b"]}
    assert owners(members) == {("in", 0): "p.c.a", ("in", 1): "p.c.a",
                               ("in", 2): "p.c.b", ("in", 3): "p.c.b"}  # fmt: skip
