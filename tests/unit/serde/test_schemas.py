"""Schema files and identity (serde/schemas.py): parsing a set of `.avsc` files into one
namespace with their history, the one walker that makes a schema self-contained, and the
canonical form and fingerprint it gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastavro.schema import parse_schema

from framework.serde.schemas import (
    SCHEMAS_ENV,
    SchemaError,
    canonical_form,
    describe_search_path,
    fingerprint_of,
    own_schemas,
    read_directories,
    self_contained,
)


def write(directory: Path, name: str, schema: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.avsc").write_text(json.dumps(schema))


POINT = {
    "type": "record",
    "name": "x.Point",
    "doc": "a point",
    "fields": [{"name": "v", "type": "int", "default": 0, "doc": "its value"}],
}
PATH = {
    "type": "record",
    "name": "x.Path",
    "fields": [
        {"name": "first", "type": "x.Point"},
        {"name": "rest", "type": {"type": "array", "items": "x.Point"}},
        {"name": "by_name", "type": {"type": "map", "values": ["null", "x.Point"]}},
    ],
}


def test_a_type_from_another_file_is_written_out_at_its_first_use_and_named_after(tmp_path):
    write(tmp_path, "x.Path", PATH)  # sorts first: parsing must come back to it after x.Point
    write(tmp_path, "x.Point", POINT)
    parsed, named, _ = read_directories([tmp_path])
    whole = self_contained(parsed["x.Path"], named)
    first, rest, by_name = (f["type"] for f in whole["fields"])
    assert first == POINT  # docs and defaults kept, as a registry checks them
    assert rest == {"type": "array", "items": "x.Point"}
    assert by_name == {"type": "map", "values": ["null", "x.Point"]}
    assert "__" not in json.dumps(whole)  # fastavro's own keys dropped
    # the self-contained form parses on its own, with nothing else in the namespace
    assert parse_schema(whole, named_schemas={})["name"] == "x.Path"


def test_the_canonical_form_is_the_self_contained_one_stripped_to_what_identifies_it(tmp_path):
    write(tmp_path, "x.Path", PATH)
    write(tmp_path, "x.Point", POINT)
    parsed, named, _ = read_directories([tmp_path])
    point = '{"name":"x.Point","type":"record","fields":[{"name":"v","type":"int"}]}'
    assert canonical_form(parsed["x.Path"], named) == (
        '{"name":"x.Path","type":"record","fields":[{"name":"first","type":' + point + "},"
        '{"name":"rest","type":{"type":"array","items":"x.Point"}},'
        '{"name":"by_name","type":{"type":"map","values":["null","x.Point"]}}]}'
    )
    # a doc changes nothing on the wire: same fingerprint
    undocumented = {**POINT, "doc": "other", "fields": [{"name": "v", "type": "int"}]}
    assert fingerprint_of(canonical_form(parse_schema(undocumented), {})) == fingerprint_of(
        canonical_form(parsed["x.Point"], named)
    )


def test_a_recursive_type_refers_to_itself_by_name():
    node = {
        "type": "record",
        "name": "x.Node",
        "fields": [{"name": "next", "type": ["null", "x.Node"]}],
    }
    named: dict = {}
    parsed = parse_schema(node, named_schemas=named)
    assert self_contained(parsed, named)["fields"][0]["type"] == ["null", "x.Node"]
    assert self_contained("x.Node", named)["name"] == "x.Node"  # a bare name is written out


def test_an_error_type_is_a_record_in_the_canonical_form():
    error = {"type": "error", "name": "x.Oops", "fields": [{"name": "why", "type": "string"}]}
    assert canonical_form(parse_schema(error), {}) == (
        '{"name":"x.Oops","type":"record","fields":[{"name":"why","type":"string"}]}'
    )


def test_earlier_versions_are_read_from_history_oldest_first(tmp_path):
    write(tmp_path, "x.Point", POINT)
    old = {"type": "record", "name": "x.Point", "fields": []}
    write(tmp_path / "history", "x.Point.v10", old)
    write(tmp_path / "history", "x.Point.v2", {**old, "doc": "v2"})
    _, _, history = read_directories([tmp_path])
    assert [(n, s.get("doc")) for n, s in history["x.Point"]] == [(2, "v2"), (10, None)]


def test_a_history_file_not_named_for_a_version_says_how_to_name_it(tmp_path):
    write(tmp_path, "x.Point", POINT)
    write(tmp_path / "history", "x.Point-old", POINT)
    with pytest.raises(SchemaError, match=r"x\.Point-old\.avsc: name earlier versions"):
        read_directories([tmp_path])


def test_two_files_defining_one_type_again_are_refused(tmp_path):
    inner = {"type": "record", "name": "x.In", "fields": []}
    write(
        tmp_path, "x.A", {"type": "record", "name": "x.A", "fields": [{"name": "i", "type": inner}]}
    )
    write(tmp_path, "x.In", inner)
    with pytest.raises(SchemaError, match=r"defines x\.In again"):
        read_directories([tmp_path])


def test_the_search_path_description_names_the_variable_and_what_it_finds(tmp_path, monkeypatch):
    monkeypatch.setenv(SCHEMAS_ENV, f"{tmp_path}/a:{tmp_path}/b")
    text = describe_search_path()
    assert f"${SCHEMAS_ENV}" in text
    assert f"now: {tmp_path}/a, {tmp_path}/b." in text


def test_logwheels_own_types_ship_with_the_package():
    parsed, _, history = read_directories([own_schemas()])
    assert {"logwheel.Watermark", "logwheel.TimerEntry"} <= set(parsed)
    assert all(name.startswith("logwheel.") for name in parsed)
    assert history["logwheel.Watermark"][0][0] == 1


# -- fingerprints -------------------------------------------------------------------------

# CRC-64-AVRO fingerprints of Apache Avro's published schema test cases
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


@pytest.mark.parametrize(("source", "canonical", "expected"), AVRO_VECTORS)
def test_fingerprint_matches_apache_avro_vectors(source: str, canonical: str, expected: int):
    named: dict = {}
    schema = parse_schema(json.loads(source), named_schemas=named)
    assert canonical_form(schema, named) == canonical
    assert fingerprint_of(canonical) == little_endian(expected)
    assert rabin(canonical.encode()) == expected & (2**64 - 1)
