"""`logwheel schemas check`: every version of every record type can read the one before it
and be read by it (Avro schema resolution, both ways), so a reader on either version decodes
what a writer on the other wrote.

The versions of a type are `history/<full.name>.v<N>.avsc` beside it on the schema search
path (serde/schemas.py), oldest first, then the current `<full.name>.avsc`. Each broken rule is
one line naming the type, the field and the rule. `against` checks a type the same way against
someone else's version of it (a registry's latest, framework/kafka/registry_compat.py), in the
directions a compatibility level asks for.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from framework.serde.catalogue import Schemas

PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
"""Writer type -> reader types it resolves to (Avro spec, "Schema Resolution")."""

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


LEVELS = {
    "BACKWARD": ("backward",),
    "BACKWARD_TRANSITIVE": ("backward",),
    "FORWARD": ("forward",),
    "FORWARD_TRANSITIVE": ("forward",),
    "FULL": ("backward", "forward"),
    "FULL_TRANSITIVE": ("backward", "forward"),
}
"""A Schema Registry's compatibility levels as the directions to check a new version against
the latest in ("backward": the new version reads the latest's values; "forward": readers on
the latest read the new one's). NONE, or no level, is logwheel's own rule: both ways."""


def directions(level: str | None) -> tuple[str, ...]:
    """The directions a registry's compatibility level asks for (`LEVELS`)."""
    return LEVELS.get((level or "").upper(), ("backward", "forward"))


def check(schemas: Schemas) -> list[str]:
    """Every broken rule between consecutive versions of every type, one line each."""
    problems = []
    for name, older in sorted(schemas.history.items()):
        versions = [*older, (older[-1][0] + 1, schemas[name])]
        for (a, old), (b, new) in zip(versions, versions[1:], strict=False):
            ways = ("backward", "forward")
            problems += _broken(
                f"{name} v{a} -> v{b}", name, new, old, ways, f"v{b} readers", f"v{a} readers"
            )
    return problems


def against(name: str, mine: Any, theirs: Any, label: str, ways: Collection[str]) -> list[str]:
    """Every broken rule between this project's version of type `name` (`mine`) and
    another's (`theirs`, self-contained Avro JSON, e.g. a registry's latest version), in
    `ways` (`directions`); each line starts with `label`."""
    return _broken(
        label, name, mine, theirs, ways, "readers on the project's version", "readers on the latest"
    )


def full_name(schema: Any) -> str | None:
    """The full name of a record schema (Avro JSON), None for any other schema."""
    if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return None
    name, namespace = schema.get("name", ""), schema.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _broken(label: str, name: str, new: Any, old: Any, ways: Collection[str], new_readers: str,
            old_readers: str) -> list[str]:  # fmt: skip
    problems = []
    if "backward" in ways:
        problems += [f"{label}: {p} (backward: {new_readers})"
                     for p in _resolve(new, old, name)]  # fmt: skip
    if "forward" in ways:
        problems += [f"{label}: {p} (forward: {old_readers})"
                     for p in _resolve(old, new, name)]  # fmt: skip
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
