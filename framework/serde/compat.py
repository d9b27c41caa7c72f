"""`logwheel schemas check`: every version of every record type can read the one before it
and be read by it (Avro schema resolution, both ways), so a reader on either version decodes
what a writer on the other wrote.

The versions of a type are `history/<full.name>.v<N>.avsc` beside it on the schema search
path (serde/schemas.py), oldest first, then the current `<full.name>.avsc`. Each broken rule is
one line naming the type, the field and the rule.
"""

from __future__ import annotations

from typing import Any

from framework.serde.codecs import Schemas

PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
"""Writer type -> reader types it resolves to (Avro spec, "Schema Resolution")."""

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def check(schemas: Schemas) -> list[str]:
    """Every broken rule between consecutive versions of every type, one line each."""
    problems = []
    for name, older in sorted(schemas.history.items()):
        versions = [*older, (older[-1][0] + 1, schemas[name])]
        for (a, old), (b, new) in zip(versions, versions[1:], strict=False):
            pair = f"{name} v{a} -> v{b}"
            problems += [f"{pair}: {p} (backward: v{b} readers)" for p in _resolve(new, old, name)]
            problems += [f"{pair}: {p} (forward: v{a} readers)" for p in _resolve(old, new, name)]
    return problems


def _kind(schema: Any) -> str:
    if isinstance(schema, str):
        return schema if schema in PRIMITIVES else "named"
    if isinstance(schema, list):
        return "union"
    return schema["type"] if isinstance(schema["type"], str) else _kind(schema["type"])


def _resolve(reader: Any, writer: Any, where: str) -> list[str]:
    """What prevents `reader` from reading values written with `writer`."""
    if isinstance(writer, list):  # every branch the writer may use must resolve
        return [p for branch in writer for p in _resolve(reader, branch, where)]
    if isinstance(reader, list):
        if any(not _resolve(branch, writer, where) for branch in reader):
            return []
        return [f"{where}: no branch of the reader's union reads a {_describe(writer)}"]
    rk, wk = _kind(reader), _kind(writer)
    if rk in PRIMITIVES or wk in PRIMITIVES:
        if rk == wk or rk in PROMOTIONS.get(wk, ()):
            return []
        return [f"{where}: type changed from {wk} to {rk}, which does not promote"]
    if rk != wk:
        return [f"{where}: type changed from {wk} to {rk}"]
    if rk == "record":
        return _records(reader, writer, where)
    if rk == "enum":
        missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
        if missing and "default" not in reader:
            return [f"{where}: enum symbol(s) {missing} removed without a default symbol"]
        return []
    if rk == "array":
        return _resolve(reader["items"], writer["items"], f"{where}[]")
    if rk == "map":
        return _resolve(reader["values"], writer["values"], f"{where}{{}}")
    if rk == "fixed" and reader.get("size") != writer.get("size"):
        return [f"{where}: fixed size changed from {writer.get('size')} to {reader.get('size')}"]
    return []


def _records(reader: dict, writer: dict, where: str) -> list[str]:
    problems = []
    written = {f["name"]: f for f in writer["fields"]}
    for field in reader["fields"]:
        names = [field["name"], *field.get("aliases", ())]
        source = next((written[n] for n in names if n in written), None)
        path = f"{where}.{field['name']}"
        if source is None:
            if "default" not in field:
                problems.append(f"{path}: field added without a default")
            continue
        problems += _resolve(field["type"], source["type"], path)
    return problems


def _describe(schema: Any) -> str:
    kind = _kind(schema)
    return kind if kind in PRIMITIVES else f"{kind} {schema.get('name', '')}".strip()
