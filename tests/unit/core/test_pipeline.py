"""Declaring a pipeline: the topics a declaration implies, and declarations that cannot work
refused at once, each in one line that names the fix."""

from __future__ import annotations

import pytest

from framework import BoundedOutOfOrderness, Computation, Pipeline, PipelineError, key_by
from framework.core.api import Record
from framework.core.pipeline import InjectorWatermark


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
    p.computation(
        "c",
        Computation,
        inputs={"theirs": None, "ours": None, "plain": None},
        outputs={"out": "wordcount.WordCount", "kept": "wordcount.WordCount"},
        formats={"kept": "avro"},
    )
    p.validate()
    without = {s: p.format_of(s, None) for s in ("theirs", "ours", "plain", "out", "kept")}
    assert without == {
        "theirs": "confluent",
        "ours": "avro",
        "plain": "json",
        "out": "avro",
        "kept": "avro",
    }
    with_registry = {s: p.format_of(s, "http://r") for s in ("theirs", "ours", "plain", "out")}
    assert with_registry == {
        "theirs": "confluent",
        "ours": "confluent",
        "plain": "json",
        "out": "confluent",
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
