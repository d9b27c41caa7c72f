"""The graph half of a pipeline (framework/core/pipeline_graph.py): which declared parts write a
stream, the schema and format a stream has (its source's, else its writers'), every stream in
order, the checks of `validate` each in one line naming the fix, a computation looked up by
name (a sink's name saying it is one), the computations read-only, and `redeclared` on the
graph. The parts' own topics, `parts()`, `part()` and `channels_of` are tested in
tests/unit/core/test_part.py; declaring, in tests/unit/core/test_pipeline.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from framework import (
    BoundedOutOfOrderness,
    Computation,
    InjectorWatermark,
    Pipeline,
    PipelineError,
    key_by,
    windows,
)
from tests.unit.sinks.fakes import IdleSink


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def shop() -> Pipeline:
    """Two sources (one bounded by its records' times, one an injector's), two computations
    writing `enriched` (one of them also an Avro `audit`), a window, a sink."""
    p = Pipeline("shop")
    p.source("orders", schema="shop.Order", watermark=BoundedOutOfOrderness(1000))
    p.source("clicks", watermark=InjectorWatermark("gen"))
    p.computation(
        "enrich",
        Noop,
        inputs={"clicks": key_by("user"), "orders": None},
        outputs={"enriched": None, "audit": "shop.Audit"},
        formats={"audit": "avro"},
    )
    p.computation("also", Noop, inputs={"orders": None}, outputs={"enriched": None})
    p.windowed(
        "per-minute",
        inputs={"enriched": None},
        window=windows.Tumbling(60_000),
        aggregate=windows.Count(),
        output="counts",
    )
    p.sink("db", inputs={"counts": None}, sink=IdleSink())
    return p


def names(parts) -> list[str]:
    return [part.name for part in parts]


def test_the_writers_of_a_stream_are_the_declared_parts_writing_it_in_declaration_order():
    p = shop()
    p.validate()
    assert names(p.writers("enriched")) == ["enrich", "also"]
    assert names(p.writers("counts")) == ["per-minute"]
    assert names(p.writers("audit")) == ["enrich"]
    # a source is written from outside (an injector is no writer); a sink writes no stream
    assert p.writers("orders") == p.writers("clicks") == []
    assert p.writers("nobody-writes-this") == []
    assert p.channels_of("orders") == []  # bounded by its records' times, whatever its policy


def test_a_streams_schema_is_its_sources_else_the_first_writer_that_names_one():
    p = shop()
    assert p.schema_of("orders") == "shop.Order"
    assert p.schema_of("audit") == "shop.Audit"
    assert p.schema_of("clicks") is None and p.schema_of("enriched") is None
    assert p.schema_of("nobody-writes-this") is None
    q = Pipeline("q").source("s")
    q.computation("a", Noop, inputs={"s": None}, outputs={"o": None})
    q.computation("b", Noop, inputs={"s": None}, outputs={"o": "x.Y"})
    assert q.schema_of("o") == "x.Y"  # a writer without one does not hide the next's


def test_a_streams_declared_format_is_its_sources_else_the_first_writer_that_declares_one():
    p = Pipeline("p", registry="http://r")
    p.source("plain")
    p.source("theirs", schema="x.Y", format="confluent")
    p.computation("a", Noop, inputs={"plain": None}, outputs={"o": "x.Y", "j": None})
    p.computation(
        "b",
        Noop,
        inputs={"theirs": None},
        outputs={"o": "x.Y", "j": None},
        formats={"o": "avro", "j": "json"},
    )
    assert (p.declared_format("plain"), p.declared_format("theirs")) == (None, "confluent")
    assert (p.declared_format("o"), p.declared_format("j")) == ("avro", "json")
    assert p.declared_format("nobody-writes-this") is None


def test_a_declared_format_wins_over_the_registry_and_the_schema():
    p = Pipeline("p")
    p.source("s")
    p.computation("a", Noop, inputs={"s": None}, outputs={"o": "x.Y", "j": None})
    p.computation(
        "b", Noop, inputs={"s": None}, outputs={"o": "x.Y", "j": None}, formats={"o": "avro"}
    )
    # declared on the second writer only: found there, registry or not
    assert (p.format_of("o", None), p.format_of("o", "http://r")) == ("avro", "avro")
    # undeclared: the registry's wire format, else Avro with a schema and JSON without
    assert (p.format_of("j", None), p.format_of("j", "http://r")) == ("json", "confluent")
    assert p.format_of("nobody-writes-this", "") == "json"  # an empty URL is no registry


def test_the_streams_are_the_sources_then_what_each_part_reads_then_writes_each_once():
    p = Pipeline("p").source("a")
    p.computation("c", Noop, inputs={"b": None}, outputs={"o": None})
    p.computation("d", Noop, inputs={"o": None, "z": None}, outputs={"q": None})
    p.computation("e", Noop, inputs={"a": None}, outputs={"z": None})
    p.source("b")  # declared after its reader, listed with the sources all the same
    assert p.streams() == ["a", "b", "o", "z", "q"]
    p.validate()


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda p: p.sink("db", inputs={"nowhere": None}, sink=IdleSink()),
            "sink 'db' reads 'nowhere', which no computation writes: "
            "declare it with pipeline.source('nowhere', ...)",
        ),
        (
            lambda p: p.computation("c", Noop, inputs={"s": None}, outputs={"o": "x.Other"}),
            "stream 'o' is declared with different schemas ['x.Other', 'x.Y']: "
            "give every writer the same one",
        ),
        (
            lambda p: p.computation("c", Noop, inputs={"s": None}, outputs={"o": None}),
            "stream 'o' is declared with different schemas ['None', 'x.Y']: "
            "give every writer the same one",
        ),
        (
            lambda p: p.computation(
                "c", Noop, inputs={"s": None}, outputs={"o": "x.Y"}, formats={"o": "avro"}
            ),
            "stream 'o' is declared with different formats ['None', 'avro']: "
            "give every writer the same one",
        ),
    ],
)
def test_a_graph_that_cannot_run_is_refused_in_one_line_naming_the_fix(declare, message):
    p = Pipeline("p").source("s")
    p.computation("w", Noop, inputs={"s": None}, outputs={"o": "x.Y"})
    p.validate()
    declare(p)
    with pytest.raises(PipelineError) as refused:
        p.validate()
    assert str(refused.value) == message


def test_a_source_written_with_another_schema_or_format_is_refused_too():
    p = Pipeline("p").source("s").source("t", schema="x.Y", format="avro")
    p.computation("w", Noop, inputs={"s": None}, outputs={"t": "x.Y"}, formats={"t": "avro"})
    p.validate()
    o = Pipeline("o").source("s").source("t", schema="x.Y", format="avro")
    o.computation("w", Noop, inputs={"s": None}, outputs={"t": "x.Y"}, formats={"t": "confluent"})
    with pytest.raises(PipelineError, match=r"^stream 't' .* formats \['avro', 'confluent'\]"):
        o.validate()
    q = Pipeline("q").source("s").source("t", schema="x.Y")
    q.computation("w", Noop, inputs={"s": None}, outputs={"t": "x.Z"})
    with pytest.raises(PipelineError, match=r"^stream 't' .* schemas \['x.Y', 'x.Z'\]"):
        q.validate()


def test_a_computation_is_found_by_name_and_any_other_name_is_refused_listing_them():
    p = shop()
    assert p["also"] is p.part("also")
    with pytest.raises(PipelineError) as sink:
        p["db"]
    assert str(sink.value) == (
        "pipeline 'shop' has no computation 'db' (sink 'db' is another part); "
        "it has ['also', 'enrich', 'per-minute']"
    )
    with pytest.raises(PipelineError, match=r"\(queries 'queries' is another part\)"):
        p["queries"]
    with pytest.raises(PipelineError) as unknown:
        p["nope"]
    assert str(unknown.value) == (
        "pipeline 'shop' has no computation 'nope'; it has ['also', 'enrich', 'per-minute']"
    )


def test_the_computations_are_a_read_only_view_without_the_sinks():
    p = shop()
    computations = p.computations
    assert list(computations) == ["enrich", "also", "per-minute"]  # as declared, no sink
    with pytest.raises(TypeError):
        computations["db"] = computations["enrich"]
    with pytest.raises(TypeError):
        del computations["enrich"]
    assert names(p.parts()) == ["enrich", "also", "per-minute", "db", "gen", "queries"]


def test_redeclared_swaps_a_sink_in_a_copy_that_keeps_the_rest_and_refuses_an_unknown_name():
    p = Pipeline("shop", partitions=3, registry="http://r").source("counts")
    p.sink("db", inputs={"counts": None}, sink=IdleSink())
    original = p.part("db")
    other = replace(original, sink=IdleSink())
    again = p.redeclared(other)
    assert type(again) is Pipeline
    assert (again.name, again.partitions, again.registry) == ("shop", 3, "http://r")
    assert again.part("db") is other and p.part("db") is original
    assert again.sources == p.sources and again.sources is not p.sources
    with pytest.raises(PipelineError) as refused:
        p.redeclared(replace(original, name="warehouse"))
    assert str(refused.value) == "pipeline 'shop' declares no sink 'warehouse'"
    assert names(p.parts()) == ["db"]
