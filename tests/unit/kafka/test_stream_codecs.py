"""Which codec a stream gets (framework/kafka/stream_codecs.py), and that a registry away mid-run is
not a bad record, without a broker or a registry."""

from __future__ import annotations

import io
import json

import pytest
from fastavro import schemaless_writer
from fastavro.schema import parse_schema

from framework import Computation, Pipeline, PipelineError
from framework.errors import BadRecord, Retry
from framework.jvm.process import any_free_port
from framework.kafka import stream_codecs
from framework.kafka.record_decoding import decode_record
from framework.kafka.schema_registry import (
    REGISTRY_ENV,
    RegistryConfigurationError,
    RegistryUnavailable,
)
from framework.serde.catalogue import decoder_for, default_schemas, encoder_for, load_schemas
from framework.serde.codecs import DecodeError
from framework.serde.confluent import WireFormat, frame
from tests.support import REPO
from tests.unit.serde.test_confluent import WORD_V1, Memory


def _pipeline(registry: str | None = None) -> Pipeline:
    p = Pipeline("serdes", registry=registry)
    p.source("theirs", schema="wordcount.WordCount", format="confluent")
    p.source("plain")
    p.computation(
        "c",
        Computation,
        inputs={"plain": None},
        outputs={"ours": "wordcount.WordCount"},
    )
    return p


def test_streams_outside_the_wire_format_keep_their_codecs(monkeypatch):
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    p = _pipeline()
    assert stream_codecs.stream_decoder(p, "plain") is decoder_for(None)
    assert stream_codecs.stream_encoder(p, "ours") is encoder_for("wordcount.WordCount")
    stream_codecs.check_registry(p, p["c"])  # nothing in the wire format: no registry asked


def test_a_wire_format_stream_without_a_registry_names_the_fix(monkeypatch):
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    with pytest.raises(PipelineError, match="LOGWHEEL_SCHEMA_REGISTRY"):
        stream_codecs.stream_decoder(_pipeline(), "theirs")


def test_the_environment_names_the_registry_and_puts_streams_with_a_schema_in_the_wire_format(
    monkeypatch,
):
    asked = []
    monkeypatch.setattr(stream_codecs, "wire_format", lambda reg: asked.append(reg.url) or _Wire())
    monkeypatch.setenv(REGISTRY_ENV, "http://env:8081")
    p = _pipeline()
    assert stream_codecs.stream_encoder(p, "ours") == ("encoder", "ours", "wordcount.WordCount")
    assert stream_codecs.stream_decoder(p, "theirs") == ("decoder", "theirs", "wordcount.WordCount")
    # no schema, no format: in the wire format too, read as its writers wrote it
    assert stream_codecs.stream_decoder(p, "plain") == ("decoder", "plain", None)
    assert stream_codecs.stream_encoder(_pipeline("http://own:8081"), "ours")[0] == "encoder"
    assert asked == ["http://env:8081"] * 3 + ["http://own:8081"]


class _Wire:
    def encoder(self, topic, name):
        return ("encoder", topic, name)

    def decoder(self, topic, name):
        return ("decoder", topic, name)


def test_a_registry_away_is_retried_not_dead_lettered():
    def away(_data):
        raise RegistryUnavailable("http://r", "the registry at http://r does not answer")

    def broken(_data):
        raise ValueError("bad bytes")

    with pytest.raises(Retry):
        decode_record(away, "s", b"k", b"v", 0, None, "s/0/", 0)
    with pytest.raises(BadRecord):
        decode_record(broken, "s", b"k", b"v", 0, None, "s/0/", 0)


THEIRS = {  # another team's WordCount: one field more than wordcount.WordCount
    **WORD_V1,
    "fields": [*WORD_V1["fields"], {"name": "lang", "type": "string", "default": "en"}],
}


@pytest.fixture
def memory_wire(monkeypatch) -> Memory:
    """The wire format against an in-memory registry, whatever URL is asked for."""
    source = Memory()
    wire = WireFormat(source, load_schemas(REPO / "schemas"))
    monkeypatch.setattr(stream_codecs, "wire_format", lambda url: wire)
    monkeypatch.setattr(stream_codecs, "connect", lambda url: source)  # it answers
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    return source


def _theirs(source: Memory, topic: str, value: dict) -> bytes:
    schema_id = source.register(f"{topic}-value", json.dumps(THEIRS))
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(THEIRS), value)
    return frame(schema_id, out.getvalue())


def test_a_table_declared_in_the_wire_format_reads_by_id_resolved_to_the_declared_schema(
    memory_wire,
):
    p = Pipeline("tables", registry="http://r")
    p.source("profiles", schema="wordcount.WordCount", format="confluent")
    value = _theirs(memory_wire, "profiles", {"word": "a", "count": 1, "lang": "fr"})
    assert stream_codecs.table_decoder(p, "profiles")(value) == {"word": "a", "count": 1}
    with pytest.raises(DecodeError, match="looks like JSON"):
        stream_codecs.table_decoder(p, "profiles")(b'{"word":"a"}')


def test_an_undeclared_table_reads_wire_format_values_as_written_once_there_is_a_registry(
    memory_wire,
):
    value = _theirs(memory_wire, "other", {"word": "a", "count": 1, "lang": "fr"})
    single = encoder_for("wordcount.WordCount")({"word": "b", "count": 2})
    decode = stream_codecs.table_decoder(Pipeline("tables", registry="http://r"), "other")
    assert decode(value) == {"word": "a", "count": 1, "lang": "fr"}  # the reader is the writer
    assert decode(single) == {"word": "b", "count": 2} and decode(b'{"x":1}') == {"x": 1}
    with pytest.raises(DecodeError, match="unknown schema id 77"):
        decode(frame(77, b""))
    with pytest.raises(DecodeError, match="not UTF-8"):
        decode(b"\xff")


def test_without_a_registry_any_decoder_is_todays_self_describing_decoding(monkeypatch):
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    p = Pipeline("tables").source("declared", schema="wordcount.WordCount")
    assert stream_codecs.any_decoder(None, "t") == default_schemas().decode_any
    assert stream_codecs.table_decoder(p, "declared") == default_schemas().decode_any
    assert stream_codecs.table_decoder(p, "undeclared") == default_schemas().decode_any


def test_a_table_under_a_registry_that_does_not_answer_fails_the_start_naming_it(monkeypatch):
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    nowhere = f"http://127.0.0.1:{any_free_port()}"
    p = Pipeline("tables", registry=nowhere).source("in")
    p.computation("c", Computation, inputs={"in": None}, tables={"t": "their.changelog"})
    with pytest.raises(RegistryConfigurationError, match=f"{nowhere} does not answer"):
        stream_codecs.check_registry(p, p["c"])


def test_a_schemaless_source_under_a_registry_is_read_as_its_writer_wrote_it(memory_wire):
    """Finding 8: another team writes with its own schema; the job names none."""
    p = Pipeline("asis", registry="http://r").source("orders").source("notes", format="json")
    p.computation(
        "c",
        Computation,
        inputs={"orders": None, "notes": None},
        outputs={"seen": None, "counts": "wordcount.WordCount"},
        formats={"seen": "json"},
    )
    written = {"word": "a", "count": 1, "lang": "fr"}
    value = _theirs(memory_wire, "orders", written)
    assert stream_codecs.stream_decoder(p, "orders")(value) == written
    assert stream_codecs.table_decoder(p, "orders")(value) == written
    with pytest.raises(DecodeError, match="looks like JSON"):  # JSON there must say so
        stream_codecs.stream_decoder(p, "orders")(b'{"word":"a"}')
    # format="json" keeps a source or an output JSON
    assert stream_codecs.stream_decoder(p, "notes") is decoder_for(None)
    assert stream_codecs.stream_encoder(p, "seen") is encoder_for(None)
    assert stream_codecs.stream_encoder(p, "counts")({"word": "b", "count": 2})[:1] == b"\x00"
    stream_codecs.check_registry(p, p["c"])


def test_a_schemaless_output_under_a_registry_is_refused_at_start_naming_the_fix(memory_wire):
    p = Pipeline("asis", registry="http://r").source("in", format="json")
    p.computation("c", Computation, inputs={"in": None}, outputs={"out": None})
    with pytest.raises(PipelineError) as caught:
        stream_codecs.check_registry(p, p["c"])
    message = str(caught.value)
    assert "'out' is in the Confluent wire format" in message and "\n" not in message
    assert "give it one, or keep it JSON with formats={'out': 'json'}" in message


def test_a_json_value_in_a_wire_format_stream_and_back_say_what_they_are(memory_wire):
    with pytest.raises(DecodeError, match=r"Confluent wire format \(schema id 7\), not JSON"):
        decoder_for(None)(frame(7, b"\x02a\x02"))


def test_every_avro_path_refuses_what_fastavro_would_not_bound(memory_wire):
    """Streams (the streaming and backfill tasks: `stream_decoder`), declared and undeclared
    tables, and changelog readers (`any_decoder`, as `ChangelogTable` and `changelog.spark`
    build it) all decode through the bounded codecs: a writer-only recursive field 5,000 deep
    (a segmentation fault in fastavro) and a single-object mark claiming 2**40 offsets are
    dead letters with their reason."""
    node = {"type": "record", "name": "Node", "fields": [{"name": "n", "type": ["null", "Node"]}]}
    deep = {**WORD_V1, "fields": [*WORD_V1["fields"], {"name": "next", "type": ["null", node]}]}
    deep_id = memory_wire.register("x-value", json.dumps(deep))
    hostile = frame(deep_id, b"\x02a\x02" + b"\x02" * 5000 + b"\x00")
    p = Pipeline("paths", registry="http://r")
    p.source("theirs", schema="wordcount.WordCount", format="confluent")
    p.source("anything", format="confluent")
    decoders = {
        "stream, resolved": stream_codecs.stream_decoder(p, "theirs"),
        "stream, as written": stream_codecs.stream_decoder(p, "anything"),
        "declared table": stream_codecs.table_decoder(p, "theirs"),
        "undeclared table, changelog reader": stream_codecs.table_decoder(p, "their.changelog"),
    }
    for path, decode in decoders.items():
        with pytest.raises(DecodeError, match=f"values nested deeper than 100 .*id {deep_id}"):
            decode(hostile)
        good = _theirs(memory_wire, "theirs", {"word": "a", "count": 1})
        assert decode(good)["word"] == "a", path
    mark = encoder_for("logwheel.Watermark")({"producer": "p", "watermark": 1, "offsets": []})
    forged = mark[:-3] + b"\x80\x80\x80\x80\x80\x40" + b"\x00\x00\x00"  # 2**40 offsets
    for decode in (decoders["undeclared table, changelog reader"], default_schemas().decode_any):
        with pytest.raises(DecodeError, match="a block of 1099511627776 array items"):
            decode(forged)
