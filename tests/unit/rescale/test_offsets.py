"""Where a computation's topics stand before a rescale (framework/rescale/offsets.py): each
partition's read_committed end, waited for while a transaction's markers are on their way and
refused when a transaction stays open; the group's committed offsets; and topics deleted until
the cluster no longer lists them. The clients are stand-ins: what the broker answers is tested
in tests/integration/test_rescale.py."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from framework import Computation, Pipeline, key_by
from framework.core.pipeline import PipelineError
from framework.rescale import offsets
from tests.unit.streaming.fakes import FakeConsumer


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def spec():
    pipeline = Pipeline("rs", partitions=2)
    pipeline.source("clicks")
    pipeline.computation("c", Nothing, inputs={"clicks": key_by("u")})
    return pipeline["c"]


class Time:
    """A clock that only sleeping moves, and what happens while the rescale sleeps."""

    def __init__(self, meanwhile=lambda: None) -> None:
        self.now, self.meanwhile, self.sleeps = 0.0, meanwhile, 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.meanwhile()


def clients(monkeypatch, clock: Time | None = None) -> dict[str, FakeConsumer]:
    """The consumers `ends_of` makes, by isolation level, each with the config it was given."""
    made = {"read_committed": FakeConsumer(), "read_uncommitted": FakeConsumer()}

    def consumer(config):
        made[config["isolation.level"]].config = config
        return made[config["isolation.level"]]

    monkeypatch.setattr(offsets, "Consumer", consumer)
    monkeypatch.setattr(offsets, "time", clock or Time())
    return made


def test_each_partition_of_each_topic_ends_where_read_committed_readers_stop(monkeypatch):
    made = clients(monkeypatch)
    for consumer in made.values():
        consumer.add("a", 0, "xyz")
        consumer.add("a", 1, "x")
    ends = offsets.ends_of("b:9092", {}, spec(), ["a", "b"], {"a": 2, "b": 0})
    assert ends == {("a", 0): (0, 3), ("a", 1): (0, 1)}
    assert made["read_committed"].config["group.id"] == "rs.c.reader"
    assert all(c.closed for c in made.values())


def test_an_end_behind_the_last_record_is_waited_for_while_the_markers_arrive(monkeypatch):
    clock = Time()
    made = clients(monkeypatch, clock)
    made["read_uncommitted"].add("a", 0, "xyz")
    made["read_committed"].add("a", 0, "xy")
    clock.meanwhile = lambda: clock.sleeps == 3 and made["read_committed"].add("a", 0, "z")
    assert offsets.ends_of("b:9092", {}, spec(), ["a"], {"a": 1}) == {("a", 0): (0, 3)}
    assert clock.sleeps == 3


def test_a_transaction_open_past_the_markers_wait_refuses_the_rescale(monkeypatch):
    clock = Time()
    made = clients(monkeypatch, clock)
    made["read_uncommitted"].add("a", 1, "xyz")
    with pytest.raises(PipelineError, match=r"a\[1\] has an open transaction"):
        offsets.ends_of("b:9092", {}, spec(), ["a"], {"a": 2})
    assert offsets.MARKERS_S < clock.now < offsets.MARKERS_S + 0.5  # waited that out, no more
    assert all(c.closed for c in made.values())


def test_only_partitions_the_group_has_committed_have_an_offset(monkeypatch):
    made = []

    def consumer(config):
        made.append(FakeConsumer({("rs.c.clicks.by-key", 0): 17, ("clicks", 1): 0}))
        made[-1].config = config
        return made[-1]

    monkeypatch.setattr(offsets, "Consumer", consumer)
    tps = [("rs.c.clicks.by-key", 0), ("rs.c.clicks.by-key", 1), ("clicks", 1)]
    found = offsets.committed_of("b:9092", {}, spec(), tps)
    assert found == {("rs.c.clicks.by-key", 0): 17, ("clicks", 1): 0}
    assert made[0].config["group.id"] == "rs.c" and made[0].closed


class Admin:
    """A cluster's topics; a deleted one stays listed for `lingers` more listings."""

    def __init__(self, topics: set[str], lingers: int = 0) -> None:
        self.topics, self.lingers = set(topics), lingers
        self.deleted: list[list[str]] = []
        self._going: set[str] = set()

    def list_topics(self, timeout):
        if self.lingers:
            self.lingers -= 1
        else:
            self.topics -= self._going
        return SimpleNamespace(topics=dict.fromkeys(self.topics))

    def delete_topics(self, names, operation_timeout):
        self.deleted.append(list(names))
        self._going |= set(names)
        futures = {}
        for name in names:
            futures[name] = future = Future()
            future.set_result(None)
        return futures


def test_only_topics_that_exist_are_deleted_and_the_deletion_waits_until_they_are_gone(
    monkeypatch,
):
    monkeypatch.setattr(offsets, "time", Time())
    admin = Admin({"x", "y", "z"}, lingers=3)
    offsets.delete_topics(admin, ["x", "y", "missing"])
    assert admin.deleted == [["x", "y"]]
    assert admin.topics == {"z"}
    none = Admin({"z"})
    offsets.delete_topics(none, ["missing"])
    assert none.deleted == []


def test_topics_still_listed_after_the_timeout_fail_naming_them(monkeypatch):
    monkeypatch.setattr(offsets, "time", Time())
    admin = Admin({"x"}, lingers=1_000)
    with pytest.raises(PipelineError, match=r"topics \['x'\] were not deleted within 5 s"):
        offsets.delete_topics(admin, ["x"], timeout=5)
