"""Which codec a stream gets (framework/kafka/serdes.py), and that a registry away mid-run is
not a bad record, without a broker or a registry."""

from __future__ import annotations

import pytest

from framework import Computation, Pipeline, PipelineError
from framework.errors import BadRecord, Retry
from framework.kafka import serdes
from framework.kafka.records import decode_record
from framework.kafka.schema_registry import REGISTRY_ENV, RegistryUnavailable
from framework.serde.codecs import decoder_for, encoder_for


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
    assert serdes.stream_decoder(p, "plain") is decoder_for(None)
    assert serdes.stream_encoder(p, "ours") is encoder_for("wordcount.WordCount")
    serdes.check_registry(p, p["c"])  # nothing in the wire format: no registry asked


def test_a_wire_format_stream_without_a_registry_names_the_fix(monkeypatch):
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    with pytest.raises(PipelineError, match="LOGWHEEL_SCHEMA_REGISTRY"):
        serdes.stream_decoder(_pipeline(), "theirs")


def test_the_environment_names_the_registry_and_puts_streams_with_a_schema_in_the_wire_format(
    monkeypatch,
):
    asked = []
    monkeypatch.setattr(serdes, "wire_format", lambda reg: asked.append(reg.url) or _Wire())
    monkeypatch.setenv(REGISTRY_ENV, "http://env:8081")
    p = _pipeline()
    assert serdes.stream_encoder(p, "ours") == ("encoder", "ours", "wordcount.WordCount")
    assert serdes.stream_decoder(p, "theirs") == ("decoder", "theirs", "wordcount.WordCount")
    assert serdes.stream_decoder(p, "plain") is decoder_for(None)  # no schema: JSON
    assert serdes.stream_encoder(_pipeline("http://own:8081"), "ours")[0] == "encoder"
    assert asked == ["http://env:8081", "http://env:8081", "http://own:8081"]


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
