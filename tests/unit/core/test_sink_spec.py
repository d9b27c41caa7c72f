"""Declaring a sink: its names and topics, and the one-line errors of a declaration that
cannot run."""

from __future__ import annotations

import pytest

from framework import Pipeline
from framework.core.pipeline import PipelineError
from framework.kafka.topics import part_topics, pipeline_topics
from tests.unit.sinks.fakes import IdleSink


def _pipeline() -> Pipeline:
    pipeline = Pipeline("shop")
    pipeline.source("orders")
    return pipeline


def test_a_sink_has_its_group_and_dead_letter_topic_and_reads_its_streams():
    pipeline = _pipeline().sink("orders-db", inputs={"orders": None}, sink=IdleSink())
    spec = pipeline.part("orders-db")
    assert (spec.kind, spec.group, spec.dlq, spec.consumed_topics) == (
        "sink",
        "shop.orders-db",
        "shop.orders-db.dlq",
        ["orders"],
    )
    assert (spec.runtime, spec.replayable, spec.queryable) == ("sink", False, False)
    assert "shop.orders-db.dlq" in {t.name for t in pipeline_topics(pipeline)}
    assert {t.name for t in part_topics(pipeline, "orders-db")} == {"orders", "shop.orders-db.dlq"}
    pipeline.validate()


@pytest.mark.parametrize(
    ("inputs", "sink", "words"),
    [
        ({}, IdleSink(), "at least one input"),
        ({"orders": lambda r: r.key}, IdleSink(), "give None"),
        ({"orders": None}, object(), "lacks open, write, close"),
    ],
)
def test_a_sink_that_cannot_run_fails_at_declaration_naming_the_fix(inputs, sink, words):
    with pytest.raises(PipelineError, match=words):
        _pipeline().sink("db", inputs=inputs, sink=sink)


def test_a_sink_reading_a_stream_nobody_writes_fails_validation():
    pipeline = _pipeline().sink("db", inputs={"payments": None}, sink=IdleSink())
    with pytest.raises(PipelineError, match=r"pipeline.source\('payments'"):
        pipeline.validate()


def test_a_sink_and_a_computation_may_not_share_a_name():
    pipeline = _pipeline().sink("db", inputs={"orders": None}, sink=IdleSink())
    with pytest.raises(PipelineError, match="a sink named 'db' is declared already"):
        pipeline.computation("db", object, inputs={"orders": None})
    with pytest.raises(PipelineError, match="declared already"):
        pipeline.sink("db", inputs={"orders": None}, sink=IdleSink())
