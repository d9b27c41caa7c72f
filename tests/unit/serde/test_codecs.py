"""Codecs: Avro single-object encoding checked against Apache Avro's published vectors,
schema loading from schemas/, and the errors the runtime turns into dead letters."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fastavro import schemaless_writer
from fastavro.schema import parse_schema

from framework.serde import codecs as serde
from framework.serde.codecs import DecodeError, EncodeError, SchemaError
from framework.serde.schemas import search_path

# CRC-64-AVRO fingerprints published by Apache Avro in share/test/data/schema-tests.txt
# (cross-checked there by the Java implementation), as signed 64-bit longs:
# (input schema, Parsing Canonical Form, fingerprint).
AVRO_VECTORS = [
    ('"null"', '"null"', 7195948357588979594),  # 000
    ('"int"', '"int"', 8247732601305521295),  # 004
    ('"long"', '"long"', -3434872931120570953),  # 006
    ('"string"', '"string"', -8142146995180207161),  # 014
    (
        '{"fields":[], "type":"record", "name":"foo", "namespace":"x.y"}',  # 020
        '{"name":"x.y.foo","type":"record","fields":[]}',
        5916914534497305771,
    ),
    (
        '{"namespace":"x.y.z", "type":"enum", "name":"foo", "doc":"foo bar", '  # 028
        '"symbols":["A1", "A2"]}',
        '{"name":"x.y.z.foo","type":"enum","symbols":["A1","A2"]}',
        -4448647247586288245,
    ),
    (
        '{ "items":{"type":"null"}, "type":"array"}',  # 031
        '{"type":"array","items":"null"}',
        -589620603366471059,
    ),
    (
        '{"name":"PigValue","type":"record",'  # 033: a recursive reference
        '"fields":[{"name":"value", "type":["null", "int", "long", "PigValue"]}]}',
        '{"name":"PigValue","type":"record","fields":[{"name":"value","type":'
        '["null","int","long","PigValue"]}]}',
        -1759257747318642341,
    ),
]

REPO_SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"

SAMPLES = {
    "logwheel.Watermark": {
        "producer": "by-key/words/1",
        "watermark": 1_700_000_000_000,
        "idle": False,
        "input_watermark": 1_700_000_000_500,
        "read": 1234,
        "percentile_late": 5,
        "offsets": [{"topic": "words", "partition": 3, "offset": 17}],
        "generation": 2,
        "sequence": 9,
    },
    "logwheel.TimerEntry": {"key": "k", "tag": "close", "time": 60_000, "domain": "processing"},
    "zeitgeist.SearchQuery": {"query": "kafka", "user": "u1", "locale": None},
    "zeitgeist.WindowResult": {"key": "kafka", "start": 0, "end": 60_000, "value": 3},
    "zeitgeist.Anomaly": {
        "query": "kafka",
        "window_start": 0,
        "kind": "spike",
        "observed": 90,
        "expected": 12.5,
    },
    "zeitgeist.Model": {"query": "kafka", "window_start": 0, "expected": 12.5, "count": 90},
    "wordcount.WordCount": {"word": "the", "count": 7},
}


def rabin(data: bytes) -> int:
    """The spec's CRC-64-AVRO, written out as an independent oracle for fastavro's."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def little_endian(signed: int) -> bytes:
    return (signed & (2**64 - 1)).to_bytes(8, "little")


def write(directory: Path, name: str, schema: dict) -> None:
    (directory / f"{name}.avsc").write_text(json.dumps(schema))


@pytest.fixture
def repo() -> serde.Schemas:
    return serde.load_schemas(REPO_SCHEMAS)


# -- fingerprints ---------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "canonical", "expected"), AVRO_VECTORS)
def test_fingerprint_matches_apache_avro_vectors(source: str, canonical: str, expected: int):
    named: dict = {}
    schema = parse_schema(json.loads(source), named_schemas=named)
    assert serde.canonical_form(schema, named) == canonical
    assert serde.fingerprint_of(canonical) == little_endian(expected)
    assert rabin(canonical.encode()) == expected & (2**64 - 1)


def test_single_object_header_of_int_matches_apache_avro():
    # lang/ruby/test/test_fingerprints.rb in apache/avro: test_single_object_encoding_header
    expected = bytes([0xC3, 0x01, 0x8F, 0x5C, 0x39, 0x3F, 0x1A, 0xD5, 0x75, 0x72])
    assert serde.MARKER + serde.fingerprint_of('"int"') == expected


def test_encoded_value_is_marker_little_endian_fingerprint_and_body(repo):
    name = "wordcount.WordCount"
    data = repo.encoder_for(name)({"word": "the", "count": 7})
    canonical = '{"name":"wordcount.WordCount","type":"record","fields":[{"name":"word","type":"string"},{"name":"count","type":"long"}]}'  # noqa: E501
    assert repo.canonical[name] == canonical
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == rabin(canonical.encode()).to_bytes(8, "little")
    assert data[10:] == b"\x06the\x0e"  # zigzag varints: len 3 -> 6, 7 -> 14


def test_every_repo_schema_fingerprint_agrees_with_the_oracle(repo):
    for name, canonical in repo.canonical.items():
        assert repo.fingerprints[name] == rabin(canonical.encode()).to_bytes(8, "little"), name


def test_types_from_other_files_are_inlined_at_first_use(tmp_path):
    b = {"type": "record", "name": "B", "namespace": "x", "fields": [{"name": "v", "type": "int"}]}
    a = {
        "type": "record",
        "name": "x.A",
        "fields": [{"name": "b", "type": "x.B"}, {"name": "again", "type": "x.B"}],
    }
    write(tmp_path, "x.A", a)  # sorts first: loading must retry it after x.B
    write(tmp_path, "x.B", b)
    schemas = serde.load_schemas(tmp_path)
    inline = {**a, "fields": [{"name": "b", "type": b}, {"name": "again", "type": "x.B"}]}
    assert schemas.canonical["x.A"] == serde.canonical_form(parse_schema(inline), {})
    assert '"again","type":"x.B"' in schemas.canonical["x.A"]
    value = {"b": {"v": 1}, "again": {"v": 2}}
    assert schemas.decoder_for("x.A")(schemas.encoder_for("x.A")(value)) == value


# -- loading --------------------------------------------------------------------------------


def test_the_search_path_is_the_env_else_here_else_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv(serde.SCHEMAS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert search_path() == [REPO_SCHEMAS]  # run from elsewhere, in a checkout
    assert set(serde.load_schemas()) >= set(SAMPLES) | {"logwheel.Watermark"}
    (tmp_path / "schemas").mkdir()
    assert search_path() == [tmp_path / "schemas"]
    monkeypatch.setenv(serde.SCHEMAS_ENV, f"{tmp_path}/a:{tmp_path}/b")
    assert search_path() == [tmp_path / "a", tmp_path / "b"]


def test_logwheels_own_types_come_with_the_package_whatever_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv(serde.SCHEMAS_ENV, str(tmp_path))
    own = serde.load_schemas()
    assert {"logwheel.Watermark", "logwheel.TimerEntry"} <= set(own)
    assert own.history["logwheel.Watermark"][0][0] == 1


def test_env_points_elsewhere(tmp_path, monkeypatch):
    write(tmp_path, "x.Only", {"type": "record", "name": "x.Only", "fields": []})
    monkeypatch.setenv(serde.SCHEMAS_ENV, str(tmp_path))
    serde.default_schemas.cache_clear()
    try:
        assert {n for n in serde.default_schemas() if not n.startswith("logwheel.")} == {"x.Only"}
        with pytest.raises(SchemaError) as missing:
            serde.encoder_for("zeitgeist.SearchQuery")
        assert f"zeitgeist.SearchQuery.avsc defining it; searched {tmp_path}" in str(missing.value)
    finally:
        serde.default_schemas.cache_clear()


def test_a_type_in_two_directories_of_the_path_names_both(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        write(tmp_path / d, "x.Twice", {"type": "record", "name": "x.Twice", "fields": []})
    with pytest.raises(SchemaError, match=r"x\.Twice\.avsc is in both .*/a and .*/b"):
        serde.load_schemas(tmp_path / "a", tmp_path / "b")


def test_a_job_cannot_redefine_logwheels_own_types(tmp_path):
    write(
        tmp_path,
        "logwheel.Watermark",
        {"type": "record", "name": "logwheel.Watermark", "fields": []},
    )
    with pytest.raises(SchemaError, match="logwheel.Watermark.avsc is in both"):
        serde.load_schemas(tmp_path)


def test_missing_directory_names_the_env_variable(tmp_path):
    with pytest.raises(SchemaError, match="LOGWHEEL_SCHEMAS"):
        serde.load_schemas(tmp_path / "nope")


def test_unknown_schema_name_names_the_missing_file():
    with pytest.raises(SchemaError, match=r"zeitgeist\.Nope\.avsc.*searched \S*schemas"):
        serde.encoder_for("zeitgeist.Nope")
    with pytest.raises(SchemaError, match=r"zeitgeist\.Nope\.avsc.*LOGWHEEL_SCHEMAS"):
        serde.decoder_for("zeitgeist.Nope")


def test_file_must_be_named_for_its_type(tmp_path):
    write(tmp_path, "x.Wrong", {"type": "record", "name": "x.Right", "fields": []})
    with pytest.raises(SchemaError, match=r"x\.Wrong\.avsc defines x\.Right"):
        serde.load_schemas(tmp_path)


def test_reference_to_undefined_type_names_the_file_to_add(tmp_path):
    write(
        tmp_path, "x.A", {"type": "record", "name": "x.A", "fields": [{"name": "b", "type": "x.B"}]}
    )
    with pytest.raises(SchemaError, match=r"uses type 'x\.B'.*add \S+/x\.B\.avsc"):
        serde.load_schemas(tmp_path)


def test_invalid_json_and_invalid_schema_fail_at_load(tmp_path):
    (tmp_path / "x.A.avsc").write_text("{not json")
    with pytest.raises(SchemaError, match="x.A.avsc is not a JSON schema"):
        serde.load_schemas(tmp_path)
    write(
        tmp_path,
        "x.A",
        {"type": "record", "name": "x.A", "fields": [{"name": "f", "type": "nope"}]},
    )
    with pytest.raises(SchemaError, match="x.A.avsc"):
        serde.load_schemas(tmp_path)


# -- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_repo_schema_round_trips(repo, name):
    data = repo.encoder_for(name)(SAMPLES[name])
    assert repo.decoder_for(name)(data) == SAMPLES[name]
    assert repo.decode_any(data) == SAMPLES[name]


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
    schemas = serde.load_schemas(tmp_path)
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


def test_codecs_are_cached_per_name(repo):
    assert repo.encoder_for("wordcount.WordCount") is repo.encoder_for("wordcount.WordCount")
    assert repo.decoder_for("wordcount.WordCount") is repo.decoder_for("wordcount.WordCount")
    assert serde.encoder_for("wordcount.WordCount") is serde.encoder_for("wordcount.WordCount")


def test_writer_schema_resolves_to_the_reader_schema(tmp_path):
    old = {"type": "record", "name": "x.V1", "fields": [{"name": "a", "type": "int"}]}
    new = {
        "type": "record",
        "name": "x.V2",
        "aliases": ["x.V1"],
        "fields": [
            {"name": "a", "type": "long"},
            {"name": "b", "type": "string", "default": "none"},
        ],
    }
    write(tmp_path, "x.V1", old)
    write(tmp_path, "x.V2", new)
    schemas = serde.load_schemas(tmp_path)
    data = schemas.encoder_for("x.V1")({"a": 5})
    assert schemas.decoder_for("x.V2")(data) == {"a": 5, "b": "none"}


def test_incompatible_writer_is_a_decode_error(repo):
    data = repo.encoder_for("wordcount.WordCount")({"word": "w", "count": 1})
    with pytest.raises(DecodeError, match="cannot read wordcount.WordCount as zeitgeist.Model"):
        repo.decoder_for("zeitgeist.Model")(data)


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
    schemas = serde.load_schemas(tmp_path)
    header, decode = schemas.header("x.Node"), schemas.decoder_for("x.Node")
    assert decode(header + b"\x02\x02" * 99 + b"\x02\x00")["next"]["v"] == 1
    with pytest.raises(
        DecodeError, match=r"values nested deeper than 100 \(writer schema x.Node\)"
    ):
        decode(header + b"\x02\x02" * 5000 + b"\x02\x00")
    with pytest.raises(DecodeError, match="truncated x.Node body"):
        decode(header + b"\x02\x02" * 3)


def test_a_writer_schema_with_items_that_take_no_bytes_is_refused_once_for_all_its_values(
    tmp_path, monkeypatch
):
    bag = {
        "type": "record",
        "name": "x.Bag",
        "fields": [{"name": "nothings", "type": {"type": "array", "items": "null"}}],
    }
    write(tmp_path, "x.Bag", bag)
    vetted = []
    real = serde.bound
    monkeypatch.setattr(serde, "bound", lambda *a: vetted.append(a[2]) or real(*a))
    schemas = serde.load_schemas(tmp_path)
    decode, header = schemas.decoder_for("x.Bag"), schemas.header("x.Bag")
    for count in (b"\x80\x80\x80\x80\x80\x80\x01", b"\x02"):  # 2**41 nulls, one null
        with pytest.raises(DecodeError, match="writer schema x.Bag refused: its array items"):
            decode(header + count + b"\x00")
    assert schemas.decoder_for("x.Bag") is decode
    assert vetted.count("writer schema x.Bag") == 1


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


# -- JSON -----------------------------------------------------------------------------------


def test_json_is_compact_utf8():
    value = {"query": "café", "n": [1, 2.5, None, True]}
    data = serde.encoder_for(None)(value)
    assert data == '{"query":"café","n":[1,2.5,null,true]}'.encode()
    assert serde.decoder_for(None)(data) == value


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        {"s": {1, 2}},
        object(),
        "\ud800",
        {"a": [1, float("inf")]},
        {"n": None, "x": float("-inf")},
    ],
)
def test_json_refuses_what_other_readers_could_not_parse(value):
    with pytest.raises(EncodeError):
        serde.encode_json(value)


@pytest.mark.parametrize(
    "value",
    [{"big": 2**70}, {1: "a", None: 2, False: 3}, {"n": None, "deep": [[[None]]]}, -(2**64)],
)
def test_json_encodes_what_the_standard_library_does(value):
    data = serde.encode_json(value)
    assert json.loads(data) == json.loads(json.dumps(value))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{oops", "not JSON"),
        (b"", "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"\xc3\x01" + bytes(8), "declared without a schema"),
        (None, "tombstone"),
    ],
)
def test_undecodable_json_says_why(data, reason):
    with pytest.raises(DecodeError, match=reason):
        serde.decoder_for(None)(data)


def test_decode_any_reads_json_and_avro(repo):
    assert repo.decode_any(b'{"a":1}') == {"a": 1}
    data = repo.encoder_for("zeitgeist.Model")(SAMPLES["zeitgeist.Model"])
    assert repo.decode_any(data) == SAMPLES["zeitgeist.Model"]


def test_a_type_defined_twice_fails_at_load(tmp_path):
    b = {"type": "record", "name": "x.B", "fields": []}
    write(tmp_path, "x.B", b)
    write(tmp_path, "x.C", {"type": "record", "name": "x.C", "fields": [{"name": "b", "type": b}]})
    with pytest.raises(SchemaError, match=r"x\.C\.avsc defines x\.B again"):
        serde.load_schemas(tmp_path)
