"""Wiring a part for `logwheel run` (framework/streaming/wiring.py), without a broker: the
partition counts a computation starts with, refused in one line naming the fix where a table
or an input read by its Kafka key is not co-partitioned with its key space or a global table's
topic is missing (on a stand-in admin whose topics the test sets); which wiring runs which part,
and the refusal of a part no runtime runs; the bound of a join's describe requests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import framework.streaming.wiring as wiring
from framework import Computation, InjectorWatermark, Pipeline, PipelineError, key_by
from framework.streaming.wiring import (
    DESCRIBE_TIMEOUT_MAX_S,
    DESCRIBE_TIMEOUT_S,
    KeyedWiring,
    Settings,
    SinkWiring,
    describe_timeout,
    partition_counts,
    wiring_for,
)
from tests.unit.sinks.fakes import IdleSink


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


class TopicsAdmin:
    """An admin client whose cluster holds `topics` (name -> partition count)."""

    made: list[dict] = []

    def __init__(self, topics: dict[str, int], config: dict) -> None:
        self.topics, self.asked = topics, []
        TopicsAdmin.made.append(config)

    def list_topics(self, timeout=-1):
        self.asked.append(timeout)
        return SimpleNamespace(
            topics={
                name: SimpleNamespace(partitions={p: object() for p in range(n)})
                for name, n in self.topics.items()
            }
        )


@pytest.fixture
def cluster(monkeypatch):
    """The topics the stand-in admin lists; every AdminClient made is one of it."""
    topics: dict[str, int] = {}
    TopicsAdmin.made = []
    monkeypatch.setattr(wiring, "AdminClient", lambda config: TopicsAdmin(topics, config))
    return topics


def _spec(**declared):
    p = Pipeline("shop", partitions=3).source("orders").source("clicks")
    return p.computation("c", Noop, **declared)["c"]


def test_the_counts_are_every_topics_read_with_the_process_kafka_settings(cluster):
    cluster.update({"orders": 3, "clicks": 7, "shop.c.changelog": 3})
    spec = _spec(inputs={"orders": None, "clicks": key_by("user")})
    counts = partition_counts("b:9092", {"security.protocol": "SSL"}, spec)
    assert counts == {"orders": 3, "clicks": 7, "shop.c.changelog": 3}  # re-keyed: any count
    assert TopicsAdmin.made == [{"bootstrap.servers": "b:9092", "security.protocol": "SSL"}]


@pytest.mark.parametrize(
    ("topics", "message"),
    [
        (
            {"orders": 3, "users": 2},
            "shop.c joins table 'users' (users), which must have 3 partitions like its key "
            "space but has 2: co-partition them (same partition count and keys) or create the "
            "topic",
        ),
        (
            {"orders": 3},
            "shop.c joins table 'users' (users), which must have 3 partitions like its key "
            "space but has none (it does not exist): co-partition them (same partition count "
            "and keys) or create the topic",
        ),
    ],
)
def test_a_table_not_co_partitioned_with_the_key_space_is_refused_in_one_line(
    cluster, topics, message
):
    cluster.update(topics)
    spec = _spec(inputs={"orders": None}, tables={"users": "users"})
    with pytest.raises(PipelineError) as refused:
        partition_counts("b:9092", {}, spec)
    assert str(refused.value) == message


def test_an_input_read_by_its_kafka_key_must_have_the_key_spaces_partitions(cluster):
    cluster.update({"orders": 5, "clicks": 5})
    spec = _spec(inputs={"clicks": key_by("user"), "orders": None})
    with pytest.raises(PipelineError) as refused:
        partition_counts("b:9092", {}, spec)
    assert str(refused.value) == (
        "shop.c reads 'orders' by its Kafka key, so it needs 3 partitions like its state but it "
        "has 5: give the input key_by(...) or recreate the topic"
    )
    cluster["orders"] = 3
    assert partition_counts("b:9092", {}, spec)["orders"] == 3


def test_a_global_table_needs_its_topic_to_exist_and_any_count_will_do(cluster):
    cluster.update({"orders": 3})
    spec = _spec(inputs={"orders": None}, global_tables={"rates": "fx-rates"})
    with pytest.raises(PipelineError) as refused:
        partition_counts("b:9092", {}, spec)
    assert str(refused.value) == (
        "shop.c reads global table 'rates' from 'fx-rates', which does not exist: create the "
        "topic (or fix its name)"
    )
    cluster["fx-rates"] = 1
    assert partition_counts("b:9092", {}, spec)["fx-rates"] == 1


def _pipeline() -> Pipeline:
    p = Pipeline("shop").source("orders", watermark=InjectorWatermark("gen"))
    p.computation("c", Noop, inputs={"orders": None}, outputs={"totals": None})
    p.sink("db", inputs={"totals": None}, sink=IdleSink())
    return p


def test_a_computation_runs_keyed_and_a_sink_as_a_sink(tmp_path):
    p, settings = _pipeline(), Settings("b:9092", {}, None, tmp_path)
    keyed, sink = wiring_for(p, p.part("c"), settings), wiring_for(p, p.part("db"), settings)
    assert type(keyed) is KeyedWiring and keyed.spec is p.part("c") and keyed.s is settings
    assert type(sink) is SinkWiring and sink.spec is p.part("db") and sink.pipeline is p


@pytest.mark.parametrize(("name", "kind"), [("gen", "injector"), ("queries", "queries")])
def test_a_part_no_runtime_runs_is_refused_naming_the_parts_it_runs(tmp_path, name, kind):
    p = _pipeline()
    with pytest.raises(PipelineError) as refused:
        wiring_for(p, p.part(name), Settings("b:9092", {}, None, tmp_path))
    assert str(refused.value) == (
        f"{kind} {name!r} of pipeline 'shop' is not run by `logwheel run`; it runs c, db"
    )


def test_a_joins_describe_bound_doubles_with_each_failed_join_up_to_its_most():
    bounds = [describe_timeout(n) for n in range(8)]
    assert bounds == [5, 10, 20, 30, 30, 30, 30, 30]
    assert bounds[0] == DESCRIBE_TIMEOUT_S and max(bounds) == DESCRIBE_TIMEOUT_MAX_S
    assert describe_timeout(1_000) == DESCRIBE_TIMEOUT_MAX_S  # however many, no overflow
