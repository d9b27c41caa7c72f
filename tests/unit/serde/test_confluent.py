"""The Confluent wire format without a registry or a broker: framing, reading the header, the
schema a registry is given, and the reasons bad bytes are dead-lettered with. The registry is
an in-memory `SchemaSource`; tests/integration/test_confluent_format.py uses a real one."""

from __future__ import annotations

import io
import json
import re

import pytest
from fastavro import schemaless_writer
from fastavro.schema import parse_schema

from framework.serde.catalogue import load_schemas
from framework.serde.codecs import DecodeError, EncodeError
from framework.serde.confluent import (
    CACHE_SIZE,
    UnknownSchemaId,
    WireFormat,
    frame,
    header,
    read_header,
    registered_form,
    subject_of,
)
from tests.support import REPO

WORD_V1 = {
    "type": "record",
    "name": "wordcount.WordCount",
    "fields": [{"name": "word", "type": "string"}, {"name": "count", "type": "long"}],
}


class Memory:
    """A registry in a dict: ids from 1, one list of ids per subject."""

    url = "memory://"

    def __init__(self) -> None:
        self.by_id: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}
        self.lookups = 0

    def schema(self, schema_id: int) -> str:
        self.lookups += 1
        if schema_id not in self.by_id:
            raise UnknownSchemaId(schema_id)
        return self.by_id[schema_id]

    def register(self, subject: str, schema: str) -> int:
        found = [i for i, s in self.by_id.items() if s == schema]
        schema_id = found[0] if found else len(self.by_id) + 1
        self.by_id[schema_id] = schema
        self.subjects.setdefault(subject, []).append(schema_id)
        return schema_id


@pytest.fixture
def wire() -> WireFormat:
    return WireFormat(Memory(), load_schemas(REPO / "schemas"))


def _avro(schema: dict | str, value: object) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), value)
    return out.getvalue()


def test_a_frame_is_the_zero_byte_the_id_big_endian_and_the_body():
    assert frame(1, b"body") == b"\x00\x00\x00\x00\x01body"
    assert header(0x01020304) == b"\x00\x01\x02\x03\x04"
    assert read_header(frame(0x01020304, b"")) == 0x01020304
    assert read_header(b"\x00\x7f\xff\xff\xffrest") == 2**31 - 1
    with pytest.raises(ValueError):
        header(2**31)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "tombstone"),
        (b"", "truncated: 0 bytes"),
        (b"\x00\x00\x01", "truncated: 3 bytes"),
        (b"\x01\x00\x00\x00\x01\x02", "wrong magic byte 0x01"),
        (b"\x05", "wrong magic byte 0x05"),
        (b'{"word": "a"}', "looks like JSON"),
        (b"\xc3\x01" + bytes(12), "single-object encoded"),
        (b"\x00\xff\xff\xff\xfbbody", "negative schema id -5"),  # 4 signed bytes, as Java's
        (b"\x00\x80\x00\x00\x00", "negative schema id -2147483648"),
    ],
)
def test_a_header_that_is_not_the_wire_format_says_what_it_is(data, reason):
    with pytest.raises(DecodeError, match=reason):
        read_header(data)


def test_the_subject_of_a_topic_follows_the_topic_name_strategy():
    assert subject_of("words") == "words-value"


def test_the_registered_schema_is_self_contained_and_keeps_defaults_and_docs():
    schemas = load_schemas(REPO / "schemas")
    text = json.loads(registered_form(schemas["zeitgeist.SearchQuery"], schemas.named))
    assert text["name"] == "zeitgeist.SearchQuery" and text["doc"]
    user = next(f for f in text["fields"] if f["name"] == "user")
    assert user["default"] is None and user["type"] == ["null", "string"]
    assert not any(k.startswith("__") for k in text)
    parse_schema(text)  # parses on its own: what the registry and other teams get


def test_values_round_trip_and_the_schema_is_registered_once_under_the_subject(wire):
    encode = wire.encoder("counts", "wordcount.WordCount")
    data = encode({"word": "the", "count": 7})
    assert data[:1] == b"\x00" and read_header(data) == 1
    assert data[5:] == _avro(WORD_V1, {"word": "the", "count": 7})
    assert wire.source.subjects == {"counts-value": [1]}
    decode = wire.decoder("counts", "wordcount.WordCount")
    assert [decode(data), decode(data)] == [{"word": "the", "count": 7}] * 2
    assert wire.source.lookups == 1  # the writer schema is fetched once per id


def test_a_writer_schema_resolves_to_the_reader_schema(wire):
    v2 = {**WORD_V1, "fields": [*WORD_V1["fields"], {"name": "lang", "type": "string"}]}
    old = wire.source.register("counts-value", json.dumps(v2))
    data = frame(old, _avro(v2, {"word": "a", "count": 2, "lang": "en"}))
    assert wire.decoder("counts", "wordcount.WordCount")(data) == {"word": "a", "count": 2}
    assert wire.decoder("counts", None)(data) == {"word": "a", "count": 2, "lang": "en"}


def test_bad_bytes_are_decode_errors_with_their_reason_and_id(wire):
    data = wire.encoder("counts", "wordcount.WordCount")({"word": "three", "count": 3})
    decode = wire.decoder("counts", "wordcount.WordCount")
    cases = {
        frame(99, data[5:]): "unknown schema id 99: the registry at memory:// has no such",
        b"\x01" + data[1:]: "wrong magic byte 0x01",
        data[:-1]: "truncated body: 11 bytes end inside a value of schema id 1",
        data + b"\x00": "1 trailing bytes after the body (schema id 1)",
    }
    for bad, reason in cases.items():
        with pytest.raises(DecodeError, match=re.escape(reason)) as caught:
            decode(bad)
        assert caught.value.stage == "decode"
    assert decode(data) == {"word": "three", "count": 3}  # the rest flows


def test_a_value_that_does_not_fit_is_an_encode_error(wire):
    with pytest.raises(EncodeError, match="count"):
        wire.encoder("counts", "wordcount.WordCount")({"word": "a", "count": "many"})


def test_a_body_cut_inside_its_last_string_is_truncated_not_a_shorter_string(wire):
    data = wire.encoder("counts", "wordcount.WordCount")({"word": "w", "count": 1})
    v2 = {**WORD_V1, "fields": [*WORD_V1["fields"], {"name": "lang", "type": "string"}]}
    theirs = frame(
        wire.source.register("counts-value", json.dumps(v2)),
        _avro(v2, {"word": "w", "count": 1, "lang": "de"}),
    )
    decode = wire.decoder("counts", "wordcount.WordCount")
    for whole in (data, theirs):
        for cut in range(1, len(whole) - 5):
            with pytest.raises(DecodeError, match="truncated"):
                decode(whole[:-cut])


def test_writer_schemas_kept_parsed_are_bounded(wire):
    """Records framed with ever new ids (each a schema the registry has) cannot grow memory:
    past `CACHE_SIZE` ids the oldest writer is dropped, from the wire format and from each
    decoder, and fetched again when its id comes back."""
    decode = wire.decoder("counts", None)
    values = []
    for i in range(CACHE_SIZE + 1):
        schema = {"type": "record", "name": f"r{i}", "fields": [{"name": "n", "type": "int"}]}
        values.append(frame(wire.source.register(f"s{i}-value", json.dumps(schema)), b"\x02"))
    for value in values:
        assert decode(value) == {"n": 1}
    assert wire.source.lookups == CACHE_SIZE + 1 and len(wire._writers) == CACHE_SIZE
    assert decode(values[-1]) == {"n": 1} and wire.source.lookups == CACHE_SIZE + 1
    assert decode(values[0]) == {"n": 1}  # dropped from both: fetched again
    assert wire.source.lookups == CACHE_SIZE + 2 and len(wire._writers) == CACHE_SIZE


def test_hostile_writer_schemas_are_refused_from_their_cache_and_the_rest_flows(wire, monkeypatch):
    """Finding 1 of issue 38 without a broker: a registered writer schema whose values would
    exhaust memory, spin or crash fastavro is dead-lettered with its reason, vetted once."""
    from framework.serde import confluent

    vetted = []
    real = confluent.bound
    monkeypatch.setattr(confluent, "bound", lambda *a: vetted.append(a[2]) or real(*a))
    bomb = wire.source.register("x-value", json.dumps({"type": "array", "items": "null"}))
    junk = {"name": "junk", "type": {"type": "array", "items": "boolean"}}
    spin = wire.source.register(
        "x-value", json.dumps({**WORD_V1, "fields": [*WORD_V1["fields"], junk]})
    )
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}],
    }
    deep = wire.source.register("x-value", json.dumps(node))
    good = wire.encoder("counts", "wordcount.WordCount")({"word": "a", "count": 1})
    huge = _avro("long", 2**40)  # a block count
    as_written, as_word_count = (
        wire.decoder("counts", None),
        wire.decoder("counts", "wordcount.WordCount"),
    )
    cases = [
        (
            as_written,
            frame(bomb, huge + b"\x00"),
            f"writer schema id {bomb} refused",
        ),
        (
            as_word_count,
            frame(spin, b"\x02a\x02" + huge + b"\x00"),
            "a block of 1099511627776 array items",
        ),
        (as_written, frame(deep, b"\x02" * 5000 + b"\x00"), "values nested deeper than 100"),
    ]
    for _ in range(2):
        for decode, data, reason in cases:
            with pytest.raises(DecodeError, match=reason) as caught:
                decode(data)
            assert caught.value.stage == "decode"
            assert as_word_count(good) == {"word": "a", "count": 1}
    ids = (bomb, spin, deep, read_header(good))
    assert sorted(vetted) == sorted(f"writer schema id {i}" for i in ids)
    assert wire.source.lookups == 4  # one per id


def test_a_writer_schema_that_does_not_parse_is_refused_from_its_cache(wire):
    broken = wire.source.register("x-value", json.dumps({"type": "nothing"}))
    decode = wire.decoder("counts", None)
    for _ in range(3):
        with pytest.raises(DecodeError, match=f"schema id {broken} from memory:// does not parse"):
            decode(frame(broken, b""))
    assert wire.source.lookups == 1
