"""The part protocol (framework/core/part.py) as `Pipeline.parts()` gives it: one part of each
kind in order, with its kind, runtime, group, dead-letter topic, replayability, queryability
and own topics with their policies; the queries part only beside a queryable part; a name
taken by an injector or kept for the queries refused in one line; `redeclared` leaving the
original alone; the watermark channels of each kind of stream; the internal prefixes; and the
helpers `own_topic` and `literal`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from framework import Computation, InjectorWatermark, Pipeline, PipelineError, key_by, windows
from framework.core.part import READ_OPERATIONS, WRITE_OPERATIONS, Grant, literal, own_topic
from tests.unit.sinks.fakes import IdleSink


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def _everything() -> Pipeline:
    """A pipeline with a part of every kind: a computation, a window, a join, a sink, an
    injector (of two sources, one run as three processes) and so the queries."""
    p = Pipeline("shop", partitions=2)
    p.source("orders")
    p.source("clicks", watermark=InjectorWatermark("gen", processes=3))
    p.source("views", watermark=InjectorWatermark("gen"))
    p.computation("enrich", Noop, inputs={"clicks": key_by("user")}, outputs={"enriched": None})
    p.windowed(
        "per-minute",
        inputs={"enriched": None},
        window=windows.Tumbling(60_000, grace_ms=5_000),
        aggregate=windows.Count(),
        output="counts",
    )
    p.join(
        "paid",
        left="orders",
        right="enriched",
        inputs={"orders": None, "enriched": None},
        before_ms=0,
        after_ms=10,
        output="paid-orders",
    )
    p.sink("db", inputs={"counts": None}, sink=IdleSink())
    return p


def test_the_parts_come_declared_first_then_the_injectors_then_the_queries():
    parts = _everything().parts()
    assert [(p.name, p.kind, p.runtime) for p in parts] == [
        ("enrich", "computation", "keyed"),
        ("per-minute", "window", "keyed"),
        ("paid", "join", "keyed"),
        ("db", "sink", "sink"),
        ("gen", "injector", None),
        ("queries", "queries", None),
    ]
    assert all(p.pipeline == "shop" for p in parts)


def test_each_part_says_its_group_dead_letters_and_whether_it_is_replayed_and_queried():
    parts = {p.name: p for p in _everything().parts()}
    assert {n: (p.group, p.dlq, p.replayable, p.queryable) for n, p in parts.items()} == {
        "enrich": ("shop.enrich", "shop.enrich.dlq", True, True),
        "per-minute": ("shop.per-minute", "shop.per-minute.dlq", True, True),
        "paid": ("shop.paid", "shop.paid.dlq", True, True),
        "db": ("shop.db", "shop.db.dlq", False, False),
        "gen": (None, None, False, False),
        "queries": (None, None, False, False),
    }
    # the queries ask after exactly the queryable parts' groups, in order
    assert parts["queries"].groups == ("shop.enrich", "shop.per-minute", "shop.paid")
    # an injector writes its sources, as many processes as its first source says
    assert (parts["gen"].streams, parts["gen"].processes) == (("clicks", "views"), 3)


def test_each_part_keeps_its_own_topics_with_their_policies():
    kept = {p.name: [(t.kind, t.policy) for t in p.own_topics()] for p in _everything().parts()}
    keyed = [("changelog", "compact"), ("timers", "compact"), ("watermarks", "compact")]
    kept_after = [("dlq", "dlq"), ("replay", "replay"), ("replayed", "compact")]
    assert kept == {
        "enrich": [*keyed, ("by-key", "delete"), *kept_after],  # it re-keys its input
        "per-minute": [*keyed, *kept_after],
        "paid": [*keyed, *kept_after],
        "db": [("dlq", "dlq")],
        "gen": [("watermarks", "compact")],
        "queries": [],
    }
    names = {t.name for p in _everything().parts() for t in p.own_topics()}
    assert {n for n in names if not n.startswith("shop.")} == set()
    assert "shop.enrich.clicks.by-key" in names and "shop.gen.watermarks" in names


def test_own_topic_names_the_topic_a_part_keeps_for_a_kind_and_none_it_does_not_keep():
    parts = {p.name: p for p in _everything().parts()}
    assert own_topic(parts["enrich"], "replay") == "shop.enrich.replay"
    assert own_topic(parts["enrich"], "replayed") == "shop.enrich.replayed"
    assert own_topic(parts["enrich"], "by-key") == "shop.enrich.clicks.by-key"
    assert own_topic(parts["db"], "dlq") == "shop.db.dlq"
    assert own_topic(parts["db"], "replay") is None  # a sink's dead letters are not replayed
    assert own_topic(parts["gen"], "watermarks") == "shop.gen.watermarks"
    assert own_topic(parts["queries"], "dlq") is None


def test_literal_grants_each_topic_once_by_name_in_order():
    assert literal(["b", "a", "b"], READ_OPERATIONS) == [
        Grant("TOPIC", "LITERAL", "a", READ_OPERATIONS),
        Grant("TOPIC", "LITERAL", "b", READ_OPERATIONS),
    ]
    assert literal({"out"}, WRITE_OPERATIONS) == [
        Grant("TOPIC", "LITERAL", "out", WRITE_OPERATIONS)
    ]
    assert literal(set(), READ_OPERATIONS) == []


def test_the_queries_part_comes_only_with_a_queryable_part():
    p = Pipeline("shop").source("orders", watermark=InjectorWatermark("gen"))
    p.sink("db", inputs={"orders": None}, sink=IdleSink())
    assert [part.name for part in p.parts()] == ["db", "gen"]
    with pytest.raises(PipelineError, match="has no part 'queries'; it has sink 'db', injector"):
        p.part("queries")
    p.computation("c", Noop, inputs={"orders": None})
    assert [part.name for part in p.parts()] == ["db", "c", "gen", "queries"]
    assert p.part("queries").groups == ("shop.c",)


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda p: p.computation("gen", Noop, inputs={"orders": None}),
            "computation 'gen': an injector named 'gen' writes sources of the pipeline: "
            "give it another name",
        ),
        (
            lambda p: p.sink("gen", inputs={"orders": None}, sink=IdleSink()),
            "sink 'gen': an injector named 'gen' writes sources of the pipeline: "
            "give it another name",
        ),
        (
            lambda p: p.windowed(
                "queries",
                inputs={"orders": None},
                window=windows.Tumbling(1000),
                aggregate=windows.Count(),
                output="counts",
            ),
            "window 'queries': 'queries' names the queries of the pipeline's state "
            "(`logwheel acls`): give it another name",
        ),
        (
            lambda p: p.source("more", watermark=InjectorWatermark("queries")),
            "injector 'queries': 'queries' names the queries of the pipeline's state "
            "(`logwheel acls`): name the injector otherwise",
        ),
        (
            lambda p: p.source("more", watermark=InjectorWatermark("enrich")),
            "injector 'enrich': a computation named 'enrich' is declared already: "
            "name the injector otherwise",
        ),
    ],
)
def test_a_name_taken_by_an_injector_or_kept_for_the_queries_is_refused_in_one_line(
    declare, message
):
    p = Pipeline("shop").source("orders").source("clicks", watermark=InjectorWatermark("gen"))
    p.computation("enrich", Noop, inputs={"orders": None})
    before = [(part.kind, part.name) for part in p.parts()]
    with pytest.raises(PipelineError) as refused:
        declare(p)
    assert str(refused.value) == message
    assert [(part.kind, part.name) for part in p.parts()] == before
    assert set(p.sources) == {"orders", "clicks"}


def test_redeclared_gives_a_copy_with_the_part_replaced_and_leaves_the_original_alone():
    p = _everything()
    again = p.redeclared(replace(p["enrich"], partitions=8))
    assert (again["enrich"].partitions, p["enrich"].partitions) == (8, 2)
    assert again.part("enrich").own_topics()[0].partitions == 8
    assert p.part("enrich").own_topics()[0].partitions == 2
    # declaring on the copy adds nothing to the original
    again.source("returns")
    again.computation("refund", Noop, inputs={"returns": None})
    assert "returns" not in p.sources and "refund" not in p.computations
    assert [part.name for part in again.parts()][:5] == [
        "enrich",
        "per-minute",
        "paid",
        "db",
        "refund",
    ]
    assert [part.name for part in p.parts()] == [
        "enrich",
        "per-minute",
        "paid",
        "db",
        "gen",
        "queries",
    ]


def test_redeclared_refuses_a_part_the_pipeline_does_not_declare():
    p = _everything()
    with pytest.raises(PipelineError, match="^pipeline 'shop' declares no injector 'gen'$"):
        p.redeclared(p.part("gen"))  # injectors come from the sources, not from a declaration
    with pytest.raises(PipelineError, match="^pipeline 'shop' declares no computation 'other'$"):
        p.redeclared(replace(p["enrich"], name="other"))


def test_a_reader_learns_a_streams_watermark_from_its_injector_or_its_writers_or_its_records():
    p = _everything()
    assert p.channels_of("orders") == []  # a source bounded by its records' times
    assert p.channels_of("clicks") == p.channels_of("views") == ["shop.gen.watermarks"]
    assert p.channels_of("enriched") == ["shop.enrich.watermarks"]
    assert p.channels_of("counts") == ["shop.per-minute.watermarks"]
    assert p.channels_of("nobody-writes-this") == []
    p.computation("also", Noop, inputs={"orders": None}, outputs={"enriched": None})
    assert p.channels_of("enriched") == ["shop.enrich.watermarks", "shop.also.watermarks"]


def test_every_part_that_keeps_topics_has_an_internal_prefix_and_the_queries_none():
    assert _everything().internal_prefixes() == {
        "computation 'enrich'": "shop.enrich.",
        "window 'per-minute'": "shop.per-minute.",
        "join 'paid'": "shop.paid.",
        "sink 'db'": "shop.db.",
        "injector 'gen'": "shop.gen.",
    }
