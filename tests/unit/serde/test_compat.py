"""`logwheel schemas check` and schema versions: values of every version decode, resolved to
the current one; a version that breaks Avro resolution either way is named with its rule."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fastavro import schemaless_writer

from framework.cli.main import main
from framework.core.watermarks import decode_mark
from framework.serde.avro_codec import MARKER
from framework.serde.catalogue import default_schemas, load_schemas
from framework.serde.compat import check

V1 = {
    "type": "record",
    "name": "User",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    ],
}


def version(**changes) -> dict:
    schema = json.loads(json.dumps(V1))
    fields = {f["name"]: f for f in schema["fields"]}
    for name, field in changes.items():
        if field is None:
            fields.pop(name)
        else:
            fields[name] = {"name": name, **field}
    schema["fields"] = list(fields.values())
    return schema


def directory(tmp_path: Path, current: dict, *older: dict) -> Path:
    (tmp_path / "history").mkdir(parents=True, exist_ok=True)
    (tmp_path / "t.User.avsc").write_text(json.dumps(current))
    for n, schema in enumerate(older, 1):
        (tmp_path / "history" / f"t.User.v{n}.avsc").write_text(json.dumps(schema))
    return tmp_path


def test_a_compatible_change_passes_and_old_values_decode_as_the_new_version(tmp_path):
    v2 = version(country={"type": "string", "default": "FR"})
    schemas = load_schemas(directory(tmp_path, v2, V1))
    assert check(schemas) == []
    old = schemas.history["t.User"][0][1]
    fp = next(fp for fp, (v, _) in schemas._older.items() if v == "t.User v1")
    buf = io.BytesIO()
    buf.write(MARKER + fp)
    schemaless_writer(buf, old, {"id": "u", "age": 3, "kind": "B"})
    assert schemas.decoder_for("t.User")(buf.getvalue()) == {
        "id": "u",
        "age": 3,
        "kind": "B",
        "country": "FR",
    }
    assert schemas.decode_any(buf.getvalue())["country"] == "FR"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            {"country": {"type": "string"}},
            "t.User.country: field added without a default (backward",
        ),
        ({"age": {"type": "string"}}, "t.User.age: type changed from int to string"),
        ({"age": {"type": "long"}}, "t.User.age: type changed from long to int, which does not"),
        (
            {"kind": {"type": {"type": "enum", "name": "Kind", "symbols": ["A"]}}},
            "t.User.kind: enum symbol(s) ['B'] removed without a default symbol (backward",
        ),
        ({"id": None}, "t.User.id: field added without a default (forward"),
    ],
)
def test_an_incompatible_change_names_the_field_and_the_rule(tmp_path, change, says):
    problems = check(load_schemas(directory(tmp_path, version(**change), V1)))
    assert any(says in p for p in problems), problems
    assert all(p.startswith("t.User v1 -> v2: ") for p in problems)


def test_the_command_fails_naming_the_problem(tmp_path, capsys, monkeypatch):
    default_schemas()  # loaded from the repository before the variable points elsewhere
    monkeypatch.setenv("LOGWHEEL_SCHEMAS", str(directory(tmp_path, version(x={"type": "int"}), V1)))
    try:
        assert main(["schemas", "check"]) == 1
    finally:
        default_schemas.cache_clear()  # nothing else may see the test's schemas
    err = capsys.readouterr().err
    assert "t.User.x: field added without a default" in err


def test_the_repositorys_schemas_are_compatible(capsys):
    assert main(["schemas", "check"]) == 0
    assert "all compatible" in capsys.readouterr().out


def older_mark(number: int, value: dict) -> bytes:
    """`value` written with version `number` of logwheel.Watermark, as an old producer did."""
    schemas = default_schemas()
    versions = dict(schemas.history["logwheel.Watermark"])
    name = f"logwheel.Watermark v{number}"
    fp = next(fp for fp, (v, _) in schemas._older.items() if v == name)
    buf = io.BytesIO()
    buf.write(MARKER + fp)
    value = {"producer": "c/task/0", "watermark": 42, "idle": False, "offsets": [], **value}
    schemaless_writer(buf, versions[number], {**value, "generation": 0, "sequence": 0})
    return buf.getvalue()


def test_a_watermark_mark_of_the_first_version_decodes():
    mark = decode_mark(older_mark(1, {}))
    assert mark.watermark == 42 and mark.input_watermark == -(2**63)


def test_a_watermark_mark_of_the_second_version_decodes_with_no_read_count():
    mark = decode_mark(older_mark(2, {"input_watermark": 40}))
    assert (mark.watermark, mark.input_watermark, mark.read, mark.percentile_late) == (42, 40, 0, 0)


def test_a_reader_on_the_older_version_reads_what_the_newer_one_wrote(tmp_path):
    """Forward: the check's promise, shown with Avro resolution itself (v2 writer, v1 reader)."""
    from fastavro import parse_schema, schemaless_reader

    v2 = version(country={"type": "string", "default": "FR"})
    schemas = load_schemas(directory(tmp_path, v2, V1))
    data = schemas.encoder_for("t.User")({"id": "u", "age": 3, "kind": "A", "country": "DE"})
    body = io.BytesIO(data[10:])
    old = schemaless_reader(body, schemas["t.User"], parse_schema(json.loads(json.dumps(V1))))
    assert old == {"id": "u", "age": 3, "kind": "A"}
