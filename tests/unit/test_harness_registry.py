"""The Harness in a pipeline with a Schema Registry (finding 8 of issue 38): a source without a
schema is handed to the hook as its writer wrote it, as `run` and the backfill read it from the
wire format (the three agree); `format="json"` keeps JSON; an output in the wire format without
a schema is refused as `logwheel run` refuses it, naming the fix. No registry is asked: the
wire format is an in-memory one (tests/unit/kafka/test_stream_codecs.py's)."""

from __future__ import annotations

import pytest

from framework import Computation, Pipeline, PipelineError
from framework.backfill import task as backfill_task
from framework.kafka.record_decoding import decode_record
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import stream_decoder
from framework.testing import Harness
from tests.unit.kafka.test_stream_codecs import _theirs, memory_wire  # noqa: F401 - a fixture

WRITTEN = {"word": "a", "count": 1, "lang": "fr"}  # their WordCount, one field more than ours


class Echo(Computation):
    """Produces what it was handed, and notes it."""

    seen: list = []

    def process_record(self, ctx, record):
        Echo.seen.append(record.value)
        record.value["touched"] = True  # a hook may change its value: never the caller's
        ctx.produce("echoed", {"value": {k: v for k, v in record.value.items() if k != "raw"}})


def _pipeline(name: str, outputs: dict, formats: dict | None = None) -> Pipeline:
    p = Pipeline(name, registry="http://127.0.0.1:1")
    p.source("orders").source("notes", format="json")
    p.computation(
        "c", Echo, inputs={"orders": None, "notes": None}, outputs=outputs, formats=formats
    )
    return p


def test_a_schemaless_source_reaches_the_hook_as_written_in_run_backfill_and_the_harness(
    memory_wire,  # noqa: F811 - the fixture
):
    p = _pipeline("agree", {"echoed": None}, {"echoed": "json"})
    value = _theirs(memory_wire, "orders", WRITTEN)
    ran = decode_record(stream_decoder(p, "orders"), "orders", b"k", value, 5, None, "o/0/", 1)
    registry = RegistrySettings("http://127.0.0.1:1")
    backfilled = backfill_task.decode_record(p, registry, "orders", b"k", value, 5, None, "o/0/", 1)
    Echo.seen = []
    given = {**WRITTEN, "raw": b"\xff\x00"}  # bytes, which JSON could not carry
    harness = Harness(p, "c")
    harness.send("orders", "k", given, 5)
    assert ran.value == backfilled.value == WRITTEN
    assert Echo.seen == [{**given, "touched": True}] and "touched" not in given
    assert [r.value for r in harness.outputs("echoed")] == [{"value": {**WRITTEN, "touched": True}}]
    harness.send("notes", "k", {"tuple": (1, 2)}, 6)  # format="json": a JSON round trip
    assert Echo.seen[-1] == {"tuple": [1, 2], "touched": True}


def test_an_output_in_the_wire_format_without_a_schema_is_refused_as_run_refuses_it():
    with pytest.raises(PipelineError) as caught:
        Harness(_pipeline("refused", {"echoed": None}), "c")
    message = str(caught.value)
    assert "'echoed' is in the Confluent wire format" in message
    assert "formats={'echoed': 'json'}" in message and "\n" not in message


def test_an_output_with_a_schema_round_trips_through_avro_with_it():
    Echo.seen = []
    harness = Harness(
        Pipeline("typed", registry="http://127.0.0.1:1")
        .source("words", schema="wordcount.WordCount")
        .computation(
            "c",
            lambda: _Double(),
            inputs={"words": None},
            outputs={"doubled": "wordcount.WordCount"},
        ),
        "c",
    )
    harness.send("words", "k", {"word": "a", "count": 2}, 5)
    assert [r.value for r in harness.outputs("doubled")] == [{"word": "a", "count": 4}]
    with pytest.raises(Exception, match="count"):  # not a WordCount: refused on the way in
        harness.send("words", "k", {"word": "a", "count": "two"}, 6)


class _Double(Computation):
    def process_record(self, ctx, record):
        ctx.produce("doubled", {**record.value, "count": record.value["count"] * 2})
