"""Where schemas come from and what a schema is: logwheel's own record types (`logwheel.*`,
package data), a job's `.avsc` directories on the search path, parsing a set of files into
named types, and the Parsing Canonical Form and fingerprint that identify a type on the wire.

The search path for a job's schemas is the directories of `LOGWHEEL_SCHEMAS` (`:`-separated),
else `./schemas`, else the checkout's `schemas/` when logwheel runs from one. Each directory
holds one `<full.name>.avsc` per named type and earlier versions in
`history/<full.name>.v<N>.avsc`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from fastavro.schema import UnknownType, fingerprint, parse_schema, to_parsing_canonical_form

from framework.errors import ConfigurationError

SCHEMAS_ENV = "LOGWHEEL_SCHEMAS"
"""Environment variable naming the directories of a job's schemas, separated by `:`."""

_NAMED_TYPES = ("record", "error", "enum", "fixed")
_CHECKOUT = Path(__file__).resolve().parents[2]


class SchemaError(ConfigurationError):
    """A schema that is missing or does not parse: bad configuration, reported at start."""


def own_schemas() -> Traversable:
    """logwheel's own record types (marks, timer entries), shipped inside the package."""
    return resources.files("framework.serde") / "avro"


def search_path() -> list[Path]:
    """The directories of a job's schemas: `$LOGWHEEL_SCHEMAS`, else `./schemas`, else the
    checkout's `schemas/` (empty for an installed logwheel run elsewhere without either)."""
    env = os.environ.get(SCHEMAS_ENV)
    if env:
        return [Path(p) for p in env.split(":") if p]
    here = Path.cwd() / "schemas"
    if here.is_dir():
        return [here]
    checkout = _CHECKOUT / "schemas"
    if checkout.is_dir() and (_CHECKOUT / "pyproject.toml").is_file():
        return [checkout]
    return []


def describe_search_path() -> str:
    """The search path as `logwheel run --help` prints it."""
    found = ", ".join(str(p) for p in search_path()) or "none found"
    return (
        f"a job's Avro schemas (<full.name>.avsc) are read from ${SCHEMAS_ENV} (directories "
        f"separated by ':'), else ./schemas, else the checkout's schemas/; now: {found}. "
        "logwheel's own types ship inside the package (`logwheel schemas dump`)."
    )


# -- reading and parsing ------------------------------------------------------------------


def read_directories(
    directories: Iterable[Traversable],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[tuple[int, Any]]]]:
    """Parse every `*.avsc` of `directories` into one namespace: (parsed types by full name,
    fastavro's named types, earlier versions by full name, oldest first).

    Each file holds one named type and is named for its full name; files share the
    namespace, so a schema may use a type defined in another file (or directory) by its full
    name, in whatever order the files are read. A type defined in two directories is an
    error naming both.
    """
    pending: dict[str, Any] = {}
    where: dict[str, str] = {}
    history_dirs = []
    for directory in directories:
        if not directory.is_dir():
            raise SchemaError(
                f"schemas directory {directory} does not exist: create it, or set "
                f"{SCHEMAS_ENV} to the directories of the job's .avsc files"
            )
        for file in sorted(directory.iterdir(), key=lambda f: f.name):
            if not file.name.endswith(".avsc") or not file.is_file():
                continue
            if file.name in where:
                raise SchemaError(
                    f"{file.name} is in both {where[file.name]} and {directory}: "
                    "keep one definition of each type on the schema search path"
                )
            where[file.name] = str(directory)
            try:
                pending[file.name] = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise SchemaError(f"{directory}/{file.name} is not a JSON schema: {exc}") from None
        history_dirs.append(directory / "history")
    named: dict[str, Any] = {}
    parsed: dict[str, Any] = {}
    while pending:
        missing: dict[str, str] = {}
        progress = False
        for file_name, raw in list(pending.items()):
            label = f"{where[file_name]}/{file_name}"
            before = dict(named)
            try:
                schema = parse_schema(raw, named_schemas=named)
            except UnknownType as exc:
                named.clear()  # parse_schema registers names before it fails: undo that
                named.update(before)
                missing[file_name] = exc.name
                continue
            except Exception as exc:
                raise SchemaError(f"{label} does not parse: {exc}") from None
            redefined = sorted(n for n, s in before.items() if named[n] is not s)
            if redefined:  # fastavro silently lets the last definition win
                raise SchemaError(
                    f"{label} defines {', '.join(redefined)} again: define "
                    "each named type once, in its own file, and refer to it by full name"
                )
            expected = file_name.removesuffix(".avsc")
            name = schema.get("name") if isinstance(schema, dict) else None
            if name != expected:
                raise SchemaError(
                    f"{label} defines {name or 'an unnamed type'}; a schema "
                    f"file must define the named type it is named for ({expected})"
                )
            parsed[name] = schema
            del pending[file_name]
            progress = True
        if not progress:
            file_name, type_name = next(iter(missing.items()))
            raise SchemaError(
                f"{where[file_name]}/{file_name} uses type {type_name!r}, which no schema "
                f"defines: add {where[file_name]}/{type_name}.avsc"
            )
    history: dict[str, list[tuple[int, Any]]] = {}
    for directory in history_dirs:
        for name, versions in _history(directory, named).items():
            history.setdefault(name, []).extend(versions)
    return parsed, named, {n: sorted(v, key=lambda nv: nv[0]) for n, v in history.items()}


def _history(directory: Traversable, named: dict[str, Any]) -> dict[str, list[tuple[int, Any]]]:
    """Earlier versions under `history/`: `<full.name>.v<N>.avsc`."""
    versions: dict[str, list[tuple[int, Any]]] = {}
    if not directory.is_dir():
        return versions
    for file in sorted(directory.iterdir(), key=lambda f: f.name):
        if not file.name.endswith(".avsc"):
            continue
        name, _, number = file.name.removesuffix(".avsc").rpartition(".v")
        if not name or not number.isdigit():
            raise SchemaError(
                f"{directory}/{file.name}: name earlier versions <full.name>.v<N>.avsc"
            )
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
            others = {n: s for n, s in named.items() if n != name and not n.startswith(name + ".")}
            schema = parse_schema(raw, named_schemas=others)
        except Exception as exc:
            raise SchemaError(f"{directory}/{file.name} does not parse: {exc}") from None
        versions.setdefault(name, []).append((int(number), schema))
    return versions


# -- identity on the wire -----------------------------------------------------------------


def canonical_form(schema: Any, named: Mapping[str, Any]) -> str:
    """The Parsing Canonical Form of a parsed schema, with referenced named types inlined.

    fastavro's `to_parsing_canonical_form` writes a type defined in another file as a bare
    name, which changes the fingerprint. The Avro spec (and Java's SchemaNormalization)
    writes each named type's definition at its first occurrence and its name afterwards;
    inlining that way first makes the fingerprint match every other Avro implementation.
    """
    return to_parsing_canonical_form(self_contained(schema, named))


def self_contained(schema: Any, named: Mapping[str, Any]) -> Any:
    """A parsed schema as plain JSON data that needs no other file: each named type defined
    elsewhere (in `named`, by full name) written out at its first use and referred to by name
    after, as the Avro spec's canonical form and a Schema Registry both want; docs, defaults
    and aliases kept, fastavro's own `__` keys dropped."""
    return _inline(schema, named, set())


def _inline(schema: Any, named: Mapping[str, Any], seen: set[str]) -> Any:
    if isinstance(schema, str):
        if schema in named and schema not in seen:
            return _inline(named[schema], named, seen)
        return schema
    if isinstance(schema, list):
        return [_inline(branch, named, seen) for branch in schema]
    kind = schema["type"]
    out = {k: v for k, v in schema.items() if not k.startswith("__")}
    if kind in _NAMED_TYPES:
        seen.add(schema["name"])
    if kind in ("record", "error"):
        out["fields"] = [{**f, "type": _inline(f["type"], named, seen)} for f in schema["fields"]]
    elif kind == "array":
        out["items"] = _inline(schema["items"], named, seen)
    elif kind == "map":
        out["values"] = _inline(schema["values"], named, seen)
    return out


def fingerprint_of(canonical: str) -> bytes:
    """The 8-byte CRC-64-AVRO fingerprint of a Parsing Canonical Form, little-endian.

    fastavro returns the fingerprint as the hex of its little-endian bytes (for "int":
    "8f5c393f1ad57572", the long 0x7275d51a3f395c8f), so `bytes.fromhex` is the wire form.
    """
    return bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
