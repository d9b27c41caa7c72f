"""Placing a key on the instances that hold it, from the group's assignment and the directory
(stand-ins for the cluster): its owner first, then the holders of its standby replicas, and
an owner that does not serve named."""

from __future__ import annotations

import pytest

from framework.query import routing
from framework.query.directory import Address
from framework.query.placement import partition_of
from framework.query.routing import NotServed, Replica, Router

GROUP = "shop.count"
KEYED = "shop.count.clicks.by-key"


def router(monkeypatch, assignments: dict, directory: dict) -> Router:
    r = Router("shop", "127.0.0.1:1")
    monkeypatch.setattr(r, "_assignments", lambda group: assignments)
    monkeypatch.setattr(routing, "read_directory", lambda *args: directory)
    return r


def address(instance: str, port: int, standby: int = 0) -> Address:
    return Address(instance, f"http://127.0.0.1:{port}", standby, KEYED, 4)


def key_in(partition: int) -> str:
    return next(k for k in (f"k{i}" for i in range(1000)) if partition_of(k, 4) == partition)


def test_a_key_is_placed_on_its_owner_then_the_holders_of_its_standbys(monkeypatch):
    assignments = {
        "a": [(KEYED, 0), (KEYED, 1), ("clicks", 0), ("clicks", 1), ("clicks", 2)],
        "b": [(KEYED, 2), (KEYED, 3)],  # the raw stream's partitions say nothing of keys
    }
    directory = {"a": address("a", 1, standby=1), "b": address("b", 2, standby=1)}
    r = router(monkeypatch, assignments, directory)
    placed = r.place("count", key_in(2))
    assert placed.partition == 2
    assert placed.replicas == (
        Replica("b", "http://127.0.0.1:2", True),
        Replica("a", "http://127.0.0.1:1", False),  # a keeps the partition after 1
    )
    assert r.place("count", key_in(0)).replicas == (
        Replica("a", "http://127.0.0.1:1", True),
        Replica("b", "http://127.0.0.1:2", False),  # b keeps the partition after 3
    )


def test_an_owner_without_an_address_is_named_and_none_at_all_says_to_serve(monkeypatch):
    r = router(monkeypatch, {"a": [(KEYED, 0)], "c": [(KEYED, 1)]}, {"a": address("a", 1)})
    with pytest.raises(NotServed, match="instance c owns partition 1 .* --serve"):
        r.place("count", key_in(1))
    assert r.place("count", key_in(0)).replicas == (Replica("a", "http://127.0.0.1:1", True),)
    empty = router(monkeypatch, {}, {})
    with pytest.raises(NotServed, match="no instance of shop.count serves queries"):
        empty.place("count", "k")


def test_while_the_group_rebalances_a_key_has_no_replica(monkeypatch):
    r = router(monkeypatch, {"a": [], "b": []}, {"a": address("a", 1), "b": address("b", 2)})
    assert r.place("count", "k").replicas == ()
