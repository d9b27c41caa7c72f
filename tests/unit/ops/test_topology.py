"""The graph `logwheel graph` prints and `logwheel ui` draws, from a pipeline's declarations."""

from __future__ import annotations

from dataclasses import replace

from framework.ops.layout import columns, layout
from framework.ops.topology import Edge, Node, to_dot, topology
from jobs.enrich import build
from jobs.zeitgeist import pipeline as zeitgeist
from tests.unit.sinks.fakes import IdleSink


def test_every_stream_and_computation_is_a_node_of_its_kind_and_every_input_an_edge():
    graph = topology(zeitgeist)
    kinds = {n.id: n.kind for n in graph.nodes.values()}
    assert kinds == {
        "s:queries": "source",
        "s:window-counts": "stream",
        "s:models": "stream",
        "s:anomalies": "stream",
        "c:window-counter": "window",
        "c:model": "computation",
        "c:spike-detector": "computation",
        "c:dip-detector": "computation",
    }
    assert Edge("s:queries", "c:window-counter", "by key") in graph.edges
    assert Edge("c:dip-detector", "s:anomalies") in graph.edges
    assert len(graph.edges) == 8


def test_a_table_is_drawn_read_by_its_computation_and_fed_by_the_changelog_writer():
    graph = topology(build("shop", "x-"))
    assert graph.nodes["t:shop.profiles.changelog"].kind == "table"
    assert Edge("t:shop.profiles.changelog", "c:enrich", "", "table") in graph.edges
    assert Edge("c:profiles", "t:shop.profiles.changelog") in graph.edges
    assert "style=dashed" in to_dot(graph)


def test_sinks_and_new_kinds_show_without_changes_here():
    pipeline = build("shop", "x-")
    pipeline.sink("orders-db", inputs={"x-enriched-page-views": None}, sink=IdleSink())
    enrich = pipeline.computations["enrich"]
    pipeline = pipeline.redeclared(replace(enrich, kind="fan-out"))  # a kind nobody knew
    graph = topology(pipeline)
    assert graph.nodes["c:enrich"].kind == "fan-out"
    assert graph.nodes["k:orders-db"] == Node("k:orders-db", "sink", "orders-db", "IdleSink")
    assert Edge("s:x-enriched-page-views", "k:orders-db") in graph.edges
    assert not any(node.kind in ("injector", "queries") for node in graph.nodes.values())


def test_columns_follow_the_edges_and_boxes_do_not_overlap():
    graph = topology(zeitgeist)
    column = columns(graph)
    for e in graph.edges:
        assert column[e.target] > column[e.source]
    boxes, width, height = layout(graph)
    placed = sorted(boxes.values(), key=lambda b: (b.x, b.y))
    for a in placed:
        assert a.x > 0 and a.x + a.w <= width and a.y > 0 and a.y + a.h <= height
        for b in placed:
            if a is not b:
                apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
                assert apart, (a, b)


def test_a_cycle_is_placed_too():
    from framework import Computation, Pipeline

    pipeline = Pipeline("loop")
    pipeline.source("in")
    pipeline.computation("a", Computation, inputs={"in": None, "back": None}, outputs={"out": None})
    pipeline.computation("b", Computation, inputs={"out": None}, outputs={"back": None})
    boxes, _, _ = layout(topology(pipeline))
    assert set(boxes) == {"s:in", "s:back", "s:out", "c:a", "c:b"}
    assert boxes["s:in"].x < boxes["c:a"].x < boxes["s:out"].x < boxes["c:b"].x


def test_global_tables_are_tables_too():
    from framework import Computation, GlobalTable, Pipeline

    pipeline = Pipeline("p").source("in")
    pipeline.computation(
        "c", Computation, inputs={"in": None}, tables={"profiles": "p.profiles.changelog"},
        global_tables={"rates": GlobalTable("fx.rates", history_ms=60_000), "codes": "iso.codes"},
    )  # fmt: skip
    graph = topology(pipeline)
    assert pipeline["c"].tables_read() == [
        ("profiles", "p.profiles.changelog", "table"),
        ("rates", "fx.rates", "global table"),
        ("codes", "iso.codes", "global table"),
    ]
    assert graph.nodes["t:fx.rates"] == Node(
        "t:fx.rates", "table", "fx.rates", "global table rates"
    )
    assert Edge("t:iso.codes", "c:c", "", "table") in graph.edges
