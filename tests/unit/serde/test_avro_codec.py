"""Avro single-object encoding (serde/avro_codec.py), checked against Apache Avro's published
header and fastavro's public writer: the bytes written, the values refused naming the field, and
the bytes refused naming why (the errors the runtime dead-letters)."""

from __future__ import annotations

import io

import pytest
from fastavro import schemaless_writer

from framework.serde import avro_codec
from framework.serde.avro_codec import MARKER
from framework.serde.bounds import OutOfBounds
from framework.serde.catalogue import Schemas, load_schemas
from framework.serde.codecs import DecodeError, EncodeError
from framework.serde.schemas import fingerprint_of
from tests.unit.serde.test_catalogue import REPO_SCHEMAS, SAMPLES, write
from tests.unit.serde.test_schemas import rabin


@pytest.fixture
def repo() -> Schemas:
    return load_schemas(REPO_SCHEMAS)


def test_single_object_header_of_int_matches_apache_avro():
    # the header Apache Avro's own tests expect of a single-object encoded "int"
    expected = bytes([0xC3, 0x01, 0x8F, 0x5C, 0x39, 0x3F, 0x1A, 0xD5, 0x75, 0x72])
    assert MARKER + fingerprint_of('"int"') == expected


def test_encoded_value_is_marker_little_endian_fingerprint_and_body(repo):
    name = "wordcount.WordCount"
    data = repo.encoder_for(name)({"word": "the", "count": 7})
    canonical = '{"name":"wordcount.WordCount","type":"record","fields":[{"name":"word","type":"string"},{"name":"count","type":"long"}]}'  # noqa: E501
    assert repo.canonical[name] == canonical
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == rabin(canonical.encode()).to_bytes(8, "little")
    assert data[10:] == b"\x06the\x0e"  # zigzag varints: len 3 -> 6, 7 -> 14


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_encoders_write_what_fastavros_public_writer_writes(repo, name):
    """The encoders call fastavro's compiled writer directly (no per-call schema parsing):
    the bytes are those of its public schemaless_writer."""
    out = io.BytesIO()
    schemaless_writer(out, repo[name], SAMPLES[name], strict_allow_default=True)
    assert repo.encoder_for(name)(SAMPLES[name]) == repo.header(name) + out.getvalue()


FIELDS = {
    "type": "record",
    "name": "x.Fields",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "d", "type": "double"},
        {"name": "n", "type": "long", "default": 7},
        {"name": "u", "type": ["null", "string"]},
        {
            "name": "r",
            "type": {"type": "record", "name": "x.In", "fields": [{"name": "i", "type": "int"}]},
        },
    ],
}


@pytest.mark.parametrize(
    "value",
    [
        {"s": "a", "d": 1.5, "n": 2, "u": None, "r": {"i": 1}},
        {"s": "a", "d": 1, "u": "b", "r": {"i": 1}},  # an int for a double; n's default
        {"s": "a", "d": "-Infinity", "n": 2, "u": None, "r": {"i": 1}},  # fastavro casts
        {"s": "a", "d": 1.5, "n": 2, "r": {"i": 1}},  # u missing, without a default
        {"s": "a", "d": 1.5, "n": 2, "u": None, "r": {"i": 1}, "extra": 1},
        {"s": "a", "d": 1.5, "n": 2, "u": None, "r": {"i": 1, "extra": 1}},
        {"s": 1, "d": 1.5, "n": 2, "u": None, "r": {"i": 1}},
        {"s": "a", "d": "x", "n": 2, "u": None, "r": {"i": 1}},
    ],
)
def test_a_record_is_written_field_by_field_as_fastavro_writes_it(tmp_path, value):
    """The encoder writes a record's fields one by one: the same bytes as fastavro's record
    writer, and the same values refused (a field beyond the schema, one missing without a
    default, one of the wrong type)."""
    write(tmp_path, "x.Fields", FIELDS)
    schemas = load_schemas(tmp_path)
    out = io.BytesIO()
    try:
        schemaless_writer(out, schemas["x.Fields"], value, strict_allow_default=True)
    except Exception:
        with pytest.raises(EncodeError):
            schemas.encoder_for("x.Fields")(value)
    else:
        expected = schemas.header("x.Fields") + out.getvalue()
        assert schemas.encoder_for("x.Fields")(value) == expected


def test_defaults_fill_missing_optional_fields(repo):
    data = repo.encoder_for("zeitgeist.SearchQuery")({"query": "q"})
    assert repo.decoder_for("zeitgeist.SearchQuery")(data) == {
        "query": "q",
        "user": None,
        "locale": None,
    }


# -- errors the runtime dead-letters --------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty value"),
        (b'{"word":"w"}', "looks like JSON"),
        (b"\x00\x01" + bytes(8), "no Avro single-object marker"),
        (b"\xc3\x01\x01\x02", "truncated: 4 bytes"),
        (
            b"\xc3\x01" + bytes(8) + b"\x02w\x02",
            "unknown writer schema fingerprint 0000000000000000",
        ),
        (None, "tombstone"),
    ],
)
def test_undecodable_avro_says_why(repo, data, reason):
    with pytest.raises(DecodeError, match=reason):
        repo.decoder_for("wordcount.WordCount")(data)


def test_truncated_body_and_trailing_bytes(repo):
    data = repo.encoder_for("wordcount.WordCount")({"word": "word", "count": 1})
    decode = repo.decoder_for("wordcount.WordCount")
    for cut in range(10, len(data)):
        with pytest.raises(DecodeError, match="truncated wordcount.WordCount body"):
            decode(data[:cut])
    with pytest.raises(DecodeError, match="1 trailing bytes"):
        decode(data + b"\x00")


def test_a_recursive_schema_decodes_to_the_depth_bound_and_deeper_is_a_decode_error(tmp_path):
    """A job's own recursive type (a linked list): fastavro would recurse in C on whatever
    depth the bytes claim (a segmentation fault 5,000 deep); deeper than MAX_DEPTH is refused."""
    node = {
        "type": "record",
        "name": "x.Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "x.Node"]}],
    }
    write(tmp_path, "x.Node", node)
    schemas = load_schemas(tmp_path)
    header, decode = schemas.header("x.Node"), schemas.decoder_for("x.Node")
    assert decode(header + b"\x02\x02" * 99 + b"\x02\x00")["next"]["v"] == 1
    with pytest.raises(
        DecodeError, match=r"values nested deeper than 100 \(writer schema x.Node\)"
    ):
        decode(header + b"\x02\x02" * 5000 + b"\x02\x00")
    with pytest.raises(DecodeError, match="truncated x.Node body"):
        decode(header + b"\x02\x02" * 3)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"word": 3, "count": 1}, "word"),
        ({"word": "w", "count": "many"}, "count"),
        ({"word": "w"}, "count"),
        ({"word": "w", "count": 1, "typo": 2}, "typo"),
        ({"word": "w", "count": 2**64}, "count"),
    ],
)
def test_misfit_value_is_an_encode_error_naming_the_field(repo, value, field):
    with pytest.raises(EncodeError, match=f"wordcount.WordCount.*{field}"):
        repo.encoder_for("wordcount.WordCount")(value)


def test_misfit_nested_field_is_named(repo):
    value = {
        **SAMPLES["logwheel.Watermark"],
        "offsets": [{"topic": "t", "partition": "x", "offset": 1}],
    }
    with pytest.raises(EncodeError, match=r"OutputOffset\.partition"):
        repo.encoder_for("logwheel.Watermark")(value)


def test_non_dict_value_is_an_encode_error(repo):
    with pytest.raises(EncodeError, match="must be a dict, not str"):
        repo.encoder_for("wordcount.WordCount")("the")


def test_timer_domain_is_an_enum(repo):
    entry = {**SAMPLES["logwheel.TimerEntry"], "domain": "wall"}
    with pytest.raises(EncodeError, match="domain"):
        repo.encoder_for("logwheel.TimerEntry")(entry)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_without_the_compiled_writer_the_public_one_writes_and_refuses_alike(
    repo, name, monkeypatch
):
    compiled = avro_codec.avro_encoder(name, repo[name], repo.header(name))
    written = compiled(SAMPLES[name])
    refusal = f"a {name} value must be a dict, not str"
    with pytest.raises(EncodeError, match=refusal):
        compiled("the")
    monkeypatch.setattr(avro_codec, "_write_data", None)
    public = avro_codec.avro_encoder(name, repo[name], repo.header(name))
    assert public.__name__ != compiled.__name__  # the other writer
    assert public(SAMPLES[name]) == written
    with pytest.raises(EncodeError, match=refusal):
        public("the")


def test_a_writer_schema_the_decoder_was_not_given_is_refused_and_its_check_is_applied(repo):
    """The decoder reads only the writer schemas it is handed, each after its check."""
    name = "wordcount.WordCount"
    data = repo.encoder_for(name)({"word": "w", "count": 1})
    fp = bytes(data[2:10])

    def refuse(data: bytes, offset: int) -> int:
        raise OutOfBounds(f"refused from offset {offset}")

    assert avro_codec.avro_decoder(name, {fp: (name, repo[name], None, None)})(data) == {
        "word": "w",
        "count": 1,
    }
    with pytest.raises(DecodeError, match="unknown writer schema fingerprint"):
        avro_codec.avro_decoder(name, {})(data)
    with pytest.raises(DecodeError, match="^refused from offset 10$"):
        avro_codec.avro_decoder(name, {fp: (name, repo[name], None, refuse)})(data)
