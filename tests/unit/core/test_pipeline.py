"""Declaring a pipeline: the topics a declaration implies, and declarations that cannot work
refused at once, each in one line that names the fix."""

from __future__ import annotations

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
from framework.core.api import Record


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def test_a_computation_names_its_topics_after_the_pipeline():
    spec = (
        Pipeline("shop")
        .source("orders")
        .computation("totals", Noop, inputs={"orders": key_by("user")})["totals"]
    )
    assert spec.group == "shop.totals"
    assert (spec.changelog, spec.timers) == ("shop.totals.changelog", "shop.totals.timers")
    assert (spec.watermarks, spec.dlq) == ("shop.totals.watermarks", "shop.totals.dlq")
    assert spec.by_key("orders") == "shop.totals.orders.by-key"
    assert sorted(spec.consumed_topics) == ["orders", "shop.totals.orders.by-key"]


def test_key_by_takes_a_field_and_names_a_missing_one():
    route = key_by("user")
    assert route(Record("k", {"user": "ann"}, 0, "s", "id")) == "ann"
    with pytest.raises(KeyError):
        route(Record("k", {"other": 1}, 0, "s", "id"))


@pytest.mark.parametrize(
    ("declare", "fix"),
    [
        (lambda: Pipeline("Bad Name"), r"must match \[a-z\]\[a-z0-9-\]\*, e\.g\. 'zeitgeist'"),
        (lambda: Pipeline("p").source("s").source("s"), "source 's' is declared twice"),
        (
            lambda: Pipeline("p").source("s").computation("c", Noop, inputs={"nope": None}),
            r"declare it with pipeline\.source\('nope', \.\.\.\)",
        ),
        (
            lambda: (
                Pipeline("p")
                .source("s")
                .computation("c", Noop, inputs={"s": None}, guarantee="maybe")
            ),
            "use one of",
        ),
    ],
)
def test_a_declaration_that_cannot_work_is_refused_naming_the_fix(declare, fix):
    with pytest.raises(PipelineError, match=fix):
        declare().validate()


def test_a_stream_format_follows_its_declaration_else_the_registry_else_its_schema():
    p = Pipeline("formats")
    p.source("theirs", schema="wordcount.WordCount", format="confluent")
    p.source("ours", schema="wordcount.WordCount")
    p.source("plain")
    p.source("json", format="json")
    p.computation(
        "c",
        Computation,
        inputs={"theirs": None, "ours": None, "plain": None, "json": None},
        outputs={"out": "wordcount.WordCount", "kept": "wordcount.WordCount", "doc": None},
        formats={"kept": "avro", "doc": "json"},
    )
    p.validate()
    streams = ("theirs", "ours", "plain", "json", "out", "kept", "doc")
    assert {s: p.format_of(s, None) for s in streams} == {
        "theirs": "confluent",
        "ours": "avro",
        "plain": "json",
        "json": "json",
        "out": "avro",
        "kept": "avro",
        "doc": "json",
    }
    # with a registry, a stream that names no format is in the wire format, schema or not
    assert {s: p.format_of(s, "http://r") for s in streams} == {
        "theirs": "confluent",
        "ours": "confluent",
        "plain": "confluent",
        "json": "json",
        "out": "confluent",
        "kept": "avro",
        "doc": "json",
    }


def test_a_format_that_cannot_be_written_is_refused_at_declaration():
    p = Pipeline("formats")
    with pytest.raises(PipelineError, match="format='protobuf'"):
        p.source("s", format="protobuf")
    p.source("s")
    with pytest.raises(PipelineError, match="has no schema"):
        p.computation(
            "c", Computation, inputs={"s": None}, outputs={"o": None}, formats={"o": "confluent"}
        )
    with pytest.raises(PipelineError, match="not one of its outputs"):
        p.computation("c", Computation, inputs={"s": None}, formats={"x": "confluent"})
    with pytest.raises(PipelineError, match="format='json' with schema 'wordcount.WordCount'"):
        p.computation(
            "c",
            Computation,
            inputs={"s": None},
            outputs={"o": "wordcount.WordCount"},
            formats={"o": "json"},
        )
    with pytest.raises(PipelineError, match="leave the schema out for JSON"):
        p.source("t", schema="wordcount.WordCount", format="json")
    counted = {"inputs": {"s": None}, "aggregate": windows.Count(), "output": "w-out"}
    one_second = windows.Tumbling(size_ms=1000)
    with pytest.raises(PipelineError, match="format='json' with schema"):
        p.windowed("w", window=one_second, **counted, output_schema="x.Y", output_format="json")
    p.windowed("w", window=one_second, **counted, output_format="json")  # in a registry's too
    assert p.format_of("w-out", "http://r") == "json"


def test_a_percentile_low_watermark_is_declared_on_computations_and_windows():
    from framework import Percentile

    p = Pipeline("pctl")
    p.source("s")
    p.computation("c", Computation, inputs={"s": None}, low_watermark=Percentile(0.99))
    p.windowed(
        "w",
        inputs={"s": None},
        window=windows.Tumbling(size_ms=1000),
        aggregate=windows.Count(),
        output="o",
        low_watermark=Percentile(0.9),
    )
    p.computation("strict", Computation, inputs={"s": None})
    assert p["c"].low_watermark == Percentile(0.99) and p["w"].low_watermark == Percentile(0.9)
    assert p["strict"].low_watermark is None
    with pytest.raises(PipelineError, match="use Percentile"):
        p.computation("bad", Computation, inputs={"s": None}, low_watermark=0.99)


@pytest.mark.parametrize(
    "declare, rule",
    [
        (lambda: Pipeline("zz\n"), r"must match \[a-z\]\[a-z0-9-\]\*"),
        (lambda: Pipeline("z" * 300), "249-character limit"),
        (lambda: Pipeline("p").source("in\n"), r"must match \[A-Za-z0-9\]"),
        (lambda: Pipeline("p").source("s" * 250), "249-character limit"),
        (
            lambda: Pipeline("p").source("in").computation("c\n", Noop, inputs={"in": None}),
            r"must match \[a-z\]\[a-z0-9-\]\*",
        ),
        (
            lambda: (
                Pipeline("p" * 200)
                .source("in")
                .computation("c" * 40, Noop, inputs={"in": key_by("k")})
            ),
            "249-character limit",
        ),
    ],
)
def test_a_name_is_checked_whole_and_against_kafkas_length_limit(declare, rule):
    with pytest.raises(PipelineError, match=rule):
        declare()


def test_a_stream_inside_another_computations_internal_prefix_is_refused_either_order():
    rule = "inside computation 'a'.s internal prefix 'p.a.'"
    p = Pipeline("p").source("in").computation("a", Noop, inputs={"in": None})
    with pytest.raises(PipelineError, match=rule):  # an output named like a's watermarks
        p.computation("b", Noop, inputs={"in": None}, outputs={"p.a.watermarks": None})
    with pytest.raises(PipelineError, match=rule):
        p.source("p.a.changelog")
    q = Pipeline("p").source("p.a.timers")  # the stream first, the computation after
    with pytest.raises(PipelineError, match=rule):
        q.computation("a", Noop, inputs={"in": None})
    with pytest.raises(PipelineError, match="inside injector 'gen'"):
        Pipeline("p").source("p.gen.x").source("y", watermark=InjectorWatermark("gen"))
    # another computation's changelog read as a table stays allowed, and so do look-alikes
    p.computation("t", Noop, inputs={"in": None}, tables={"a": "p.a.changelog"})
    p.computation("u", Noop, inputs={"in": None}, outputs={"p.ab.out": None})


def test_a_source_inside_the_prefix_of_the_injector_it_is_declared_with_is_refused():
    """As a computation's own output is refused inside its own prefix: accepted, the source
    could not be read (every reader is refused for it) and the other order refused it."""
    p = Pipeline("p")
    with pytest.raises(
        PipelineError, match="^stream 'p.gen.x' is inside injector 'gen''s internal"
    ):
        p.source("p.gen.x", watermark=InjectorWatermark("gen"))
    assert p.sources == {} and p.parts() == []


def test_writing_another_pipelines_internal_topic_is_refused_and_reading_it_is_not():
    """Streams are global: an output named like pipeline billing's changelog would be that
    changelog, and `logwheel acls` would grant Write on it."""
    p = Pipeline("shop").source("in")
    rule = r"output 'billing\.count\.changelog' is named like the changelog of 'count' in "
    rule += r"pipeline 'billing'.*rename the stream, e.g. 'billing\.count-changelog'"
    with pytest.raises(PipelineError, match=rule):
        p.computation("c", Noop, inputs={"in": None}, outputs={"billing.count.changelog": None})
    with pytest.raises(PipelineError, match=r"output 'billing\.count\.in\.by-key' is named"):
        p.windowed(
            "w",
            inputs={"in": None},
            window=windows.Tumbling(size_ms=1000),
            aggregate=windows.Count(),
            output="billing.count.in.by-key",
        )
    with pytest.raises(PipelineError, match=r"injector 'gen': stream 'billing\.gen\.dlq' is"):
        p.source("billing.gen.dlq", watermark=InjectorWatermark("gen"))
    assert set(p.computations) == set() and set(p.sources) == {"in"}
    # read, it is another team's changelog: as a table or a source; dotted streams are written
    p.source("billing.count.changelog")
    p.computation(
        "d",
        Noop,
        inputs={"in": None, "billing.count.changelog": None},
        tables={"counts": "billing.count.changelog"},
        outputs={"billing.count.updates": None, "orders.v2": None},
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: BoundedOutOfOrderness(0, max_future_ms=-1), "max_future_ms=-1; use a whole"),
        (lambda: BoundedOutOfOrderness(0, max_future_ms=1.5), "max_future_ms=1.5; use a whole"),
        (lambda: BoundedOutOfOrderness(0, on_future="drop"), "on_future='drop'; use one of"),
        (lambda: InjectorWatermark("gen", max_future_ms=None), "InjectorWatermark: max_future"),
    ],
)
def test_a_skew_allowance_that_cannot_work_is_refused_at_declaration(make, message):
    with pytest.raises(PipelineError, match=message):
        make()


def test_the_skew_allowance_defaults_to_five_minutes_counted():
    policy = BoundedOutOfOrderness(ms=2000)
    assert (policy.max_future_ms, policy.on_future) == (300_000, "count")


@pytest.mark.parametrize("ms", [0, -5, 2.5, True, "60000", None])
def test_a_hook_timeout_that_is_no_positive_whole_number_of_ms_is_refused(ms):
    with pytest.raises(PipelineError, match=r"hook_timeout_ms=.*; give whole milliseconds > 0"):
        Pipeline("p").source("s").computation("c", Noop, inputs={"s": None}, hook_timeout_ms=ms)


def test_a_hook_timeout_defaults_to_a_minute_and_windowed_computations_take_one_too():
    from framework import windows

    pipeline = Pipeline("p").source("s").computation("c", Noop, inputs={"s": None})
    assert pipeline["c"].hook_timeout_ms == 60_000
    pipeline.windowed(
        "w",
        inputs={"s": key_by("user")},
        window=windows.Tumbling(size_ms=1000),
        aggregate=windows.Count(),
        output="counts",
        hook_timeout_ms=2000,
    )
    assert pipeline["w"].hook_timeout_ms == 2000
