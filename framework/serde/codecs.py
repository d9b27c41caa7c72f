"""Codecs for stream values and internal records: UTF-8 JSON, or Avro single-object encoding.

A stream declared without a schema carries compact UTF-8 JSON. A stream declared with a
schema carries Avro single-object encoding (Avro spec, "Single-object encoding"):

    C3 01 | CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form, 8 bytes
          little-endian | Avro binary body

The fingerprint makes every value self-describing without a schema registry: `schemas/`,
one `<full.name>.avsc` file per named type, is the only registry there is. A reader looks
the writer schema up by fingerprint and resolves it to the schema the stream is declared
with, so Java, Spark or any other Avro tool can read and write the same topics.

Bad configuration (a schema name with no file) fails at start with `SchemaError`; a value
that does not fit its schema fails the producing hook with `EncodeError`; a record that
cannot be decoded raises `DecodeError`, whose message the runtime puts in the dead letter's
headers.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from io import BytesIO
from pathlib import Path
from typing import Any

import orjson
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import (
    UnknownType,
    fingerprint,
    parse_schema,
    to_parsing_canonical_form,
)
from fastavro.validation import validate

from framework.errors import BadRecord, ConfigurationError

try:  # the compiled writer `schemaless_writer` calls, without its per-call schema parsing
    from fastavro._write import CYTHON_MODULE as _COMPILED
    from fastavro._write import write_data as _write_data

    if not _COMPILED:
        _write_data = None
except ImportError:  # pragma: no cover - a fastavro without its compiled writer
    _write_data = None
_WRITE_OPTIONS = {"strict": False, "strict_allow_default": True, "disable_tuple_notation": False}

MARKER = b"\xc3\x01"
"""The two bytes every Avro single-object encoded value starts with."""

HEADER_SIZE = 10
"""Marker plus the 8-byte fingerprint."""

SCHEMAS_ENV = "LOGWHEEL_SCHEMAS"
"""Environment variable naming a schemas directory to use instead of the repository's."""

Encoder = Callable[[Any], bytes]
Decoder = Callable[[bytes], Any]

_NAMED_TYPES = ("record", "error", "enum", "fixed")


class SchemaError(ConfigurationError):
    """A schema that is missing or does not parse: bad configuration, reported at start."""


class EncodeError(BadRecord):
    """A value that does not fit its stream's schema (or is not JSON-serializable)."""

    def __init__(self, reason: str) -> None:
        super().__init__("encode", reason)


class DecodeError(BadRecord):
    """Bytes that are not a value of the stream; the message is the dead letter's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__("decode", reason)


# -- locating and loading schemas ---------------------------------------------------------


def schemas_dir() -> Path:
    """The schemas directory: `$LOGWHEEL_SCHEMAS`, else the repository's top-level `schemas/`.

    The repository root is the parent of the `framework` package, which holds for a checkout
    and for `pip install -e .`. As a last resort (a plain install run from the repository)
    `./schemas` is used. The result may not exist; `load_schemas` says so.
    """
    env = os.environ.get(SCHEMAS_ENV)
    if env:
        return Path(env)
    beside_package = Path(__file__).resolve().parents[2] / "schemas"
    if beside_package.is_dir():
        return beside_package
    cwd = Path.cwd() / "schemas"
    return cwd if cwd.is_dir() else beside_package


def canonical_form(schema: Any, named: Mapping[str, Any]) -> str:
    """The Parsing Canonical Form of a parsed schema, with referenced named types inlined.

    fastavro's `to_parsing_canonical_form` writes a type defined in another file as a bare
    name, which changes the fingerprint. The Avro spec (and Java's SchemaNormalization)
    writes each named type's definition at its first occurrence and its name afterwards;
    inlining that way first makes the fingerprint match every other Avro implementation.
    """
    return to_parsing_canonical_form(_inline(schema, named, set()))


def _inline(schema: Any, named: Mapping[str, Any], seen: set[str]) -> Any:
    if isinstance(schema, str):
        if schema in named and schema not in seen:
            return _inline(named[schema], named, seen)
        return schema
    if isinstance(schema, list):
        return [_inline(branch, named, seen) for branch in schema]
    kind = schema["type"]
    if kind in _NAMED_TYPES:
        seen.add(schema["name"])
    if kind in ("record", "error"):
        fields = [
            {"name": f["name"], "type": _inline(f["type"], named, seen)} for f in schema["fields"]
        ]
        return {"type": "record", "name": schema["name"], "fields": fields}
    if kind == "array":
        return {"type": "array", "items": _inline(schema["items"], named, seen)}
    if kind == "map":
        return {"type": "map", "values": _inline(schema["values"], named, seen)}
    if kind in ("enum", "fixed"):
        return {k: v for k, v in schema.items() if not k.startswith("__")}
    return schema


def fingerprint_of(canonical: str) -> bytes:
    """The 8-byte CRC-64-AVRO fingerprint of a Parsing Canonical Form, little-endian.

    fastavro returns the fingerprint as the hex of its little-endian bytes (for "int":
    "8f5c393f1ad57572", the long 0x7275d51a3f395c8f), so `bytes.fromhex` is the wire form.
    """
    return bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))


class Schemas(Mapping[str, Any]):
    """The named Avro types of one schemas directory, parsed, fingerprinted, with codecs.

    A mapping from full name to fastavro's parsed schema. Codecs are built once per name
    and cached: the per-record path only writes or reads bytes.
    """

    def __init__(
        self,
        directory: Path,
        parsed: dict[str, Any],
        named: dict[str, Any],
        history: dict[str, list[tuple[int, Any]]] | None = None,
    ) -> None:
        self.directory = directory
        self._parsed = parsed
        self._named = named
        self.history = history or {}  # name -> earlier versions, (number, parsed), oldest first
        self.canonical: dict[str, str] = {n: canonical_form(s, named) for n, s in parsed.items()}
        self.fingerprints: dict[str, bytes] = {
            n: fingerprint_of(c) for n, c in self.canonical.items()
        }
        self._by_fingerprint: dict[bytes, str] = {}
        for name, fp in self.fingerprints.items():
            other = self._by_fingerprint.setdefault(fp, name)
            if other != name:
                raise SchemaError(
                    f"schemas {other} and {name} have the same Parsing Canonical Form "
                    f"(fingerprint {fp.hex()}); a reader could not tell them apart: "
                    "rename one or change its fields"
                )
        # earlier versions: any value ever written decodes, resolved to the current version
        self._older: dict[bytes, tuple[str, Any]] = {}
        for name, versions in self.history.items():
            for number, schema in versions:
                fp = fingerprint_of(canonical_form(schema, {**named, name: schema}))
                if fp not in self._by_fingerprint:
                    self._older[fp] = (f"{name} v{number}", schema)
                    self._by_fingerprint[fp] = name
        self._encoders: dict[str, Encoder] = {}
        self._decoders: dict[str, Decoder] = {}
        self._lock = threading.Lock()

    # Mapping
    def __getitem__(self, name: str) -> Any:
        try:
            return self._parsed[name]
        except KeyError:
            raise SchemaError(
                f"no schema {name!r}: expected a file {self.directory / (name + '.avsc')} "
                f"defining the named type {name!r}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsed)

    def __len__(self) -> int:
        return len(self._parsed)

    def name_of(self, fp: bytes) -> str | None:
        """The full name of the loaded schema with this 8-byte fingerprint, if any."""
        return self._by_fingerprint.get(fp)

    def header(self, name: str) -> bytes:
        """The 10-byte single-object header of values written with schema `name`."""
        self[name]
        return MARKER + self.fingerprints[name]

    # -- codecs ---------------------------------------------------------------------------

    def encoder_for(self, name: str | None) -> Encoder:
        """Encoder of values of schema `name` (None: JSON); SchemaError if it is unknown."""
        if name is None:
            return encode_json
        encoder = self._encoders.get(name)
        if encoder is None:
            with self._lock:
                encoder = self._encoders.setdefault(name, self._make_encoder(name))
        return encoder

    def decoder_for(self, name: str | None) -> Decoder:
        """Decoder to values of schema `name` (None: JSON); SchemaError if it is unknown."""
        if name is None:
            return decode_json
        decoder = self._decoders.get(name)
        if decoder is None:
            with self._lock:
                decoder = self._decoders.setdefault(name, self._make_decoder(name))
        return decoder

    def decode_any(self, data: bytes | None) -> Any:
        """Decode a value of any stream or internal topic: Avro with its own writer schema if
        it carries the single-object marker, JSON otherwise. For tools (dumps, status)."""
        if data is not None and data[:2] == MARKER and len(data) >= HEADER_SIZE:
            name = self.name_of(bytes(data[2:HEADER_SIZE]))
            if name is not None:
                return self.decoder_for(name)(data)
        return decode_json(data)

    def _make_encoder(self, name: str) -> Encoder:
        schema = self[name]
        header = self.header(name)
        if _write_data is not None:
            named: dict[str, Any] = {}
            schema = parse_schema(schema, named_schemas=named)

            def encode_compiled(value: Any) -> bytes:
                out = bytearray(header)
                try:
                    _write_data(out, value, schema, named, "", _WRITE_OPTIONS)
                except Exception as exc:
                    raise EncodeError(_misfit(name, schema, value, exc)) from exc
                return bytes(out)

            return encode_compiled

        def encode(value: Any) -> bytes:
            out = BytesIO()
            out.write(header)
            try:
                schemaless_writer(out, schema, value, strict_allow_default=True)
            except Exception as exc:  # fastavro raises TypeError, ValueError, OverflowError, ...
                raise EncodeError(_misfit(name, schema, value, exc)) from exc
            return out.getvalue()

        return encode

    def _make_decoder(self, name: str) -> Decoder:
        reader = self[name]
        # writer fingerprint -> (writer name, writer schema, reader schema or None if same)
        plans: dict[bytes, tuple[str, Any, Any]] = {
            fp: (n, self._parsed[n], None if n == name else reader)
            for fp, n in self._by_fingerprint.items()
            if fp not in self._older
        }
        plans.update({fp: (v, old, reader) for fp, (v, old) in self._older.items()})

        def decode(data: bytes) -> Any:
            if data is None:
                raise DecodeError(f"no value (a tombstone) where a {name} was expected")
            if data[:2] != MARKER:
                raise DecodeError(_bad_marker(name, data))
            plan = plans.get(data[2:HEADER_SIZE])
            if plan is None:
                if len(data) < HEADER_SIZE:
                    raise DecodeError(
                        f"truncated: {len(data)} bytes, shorter than the single-object header"
                    )
                raise DecodeError(
                    f"unknown writer schema fingerprint {bytes(data[2:HEADER_SIZE]).hex()}: "
                    f"no schemas/*.avsc has it (stream schema {name}); add the writer's "
                    "schema to schemas/ to read it"
                )
            writer_name, writer, resolve_to = plan
            buf = BytesIO(data)
            buf.seek(HEADER_SIZE)
            try:
                value = schemaless_reader(buf, writer, resolve_to)
            except EOFError:
                raise DecodeError(f"truncated {writer_name} body ({len(data)} bytes)") from None
            except Exception as exc:
                raise DecodeError(
                    f"cannot read {writer_name} as {name}: {type(exc).__name__}: {exc}"
                ) from exc
            if buf.tell() != len(data):
                raise DecodeError(
                    f"{len(data) - buf.tell()} trailing bytes after the {writer_name} body"
                )
            return value

        return decode


def load_schemas(directory: str | os.PathLike[str] | None = None) -> Schemas:
    """Parse every `*.avsc` of `directory` (default: `schemas_dir()`) into one `Schemas`.

    Each file holds one named type and is named for its full name, e.g.
    `zeitgeist.SearchQuery.avsc`. They share one named-types dict, so a schema may use a type
    defined in another file by its full name, in whatever order the files are read.
    """
    path = Path(directory) if directory is not None else schemas_dir()
    if not path.is_dir():
        raise SchemaError(
            f"schemas directory {path} does not exist: run from a logwheel checkout "
            f"(pip install -e .) or set {SCHEMAS_ENV} to the directory of the .avsc files"
        )
    pending: dict[str, Any] = {}
    for file in sorted(path.glob("*.avsc")):
        try:
            pending[file.name] = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SchemaError(f"{path.name}/{file.name} is not a JSON schema: {exc}") from None

    named: dict[str, Any] = {}
    parsed: dict[str, Any] = {}
    while pending:
        missing: dict[str, str] = {}
        progress = False
        for file_name, raw in list(pending.items()):
            before = dict(named)
            try:
                schema = parse_schema(raw, named_schemas=named)
            except UnknownType as exc:
                named.clear()  # parse_schema registers names before it fails: undo that
                named.update(before)
                missing[file_name] = exc.name
                continue
            except Exception as exc:
                raise SchemaError(f"{path.name}/{file_name} does not parse: {exc}") from None
            redefined = sorted(n for n, s in before.items() if named[n] is not s)
            if redefined:  # fastavro silently lets the last definition win
                raise SchemaError(
                    f"{path.name}/{file_name} defines {', '.join(redefined)} again: define "
                    "each named type once, in its own file, and refer to it by full name"
                )
            expected = file_name.removesuffix(".avsc")
            name = schema.get("name") if isinstance(schema, dict) else None
            if name != expected:
                raise SchemaError(
                    f"{path.name}/{file_name} defines {name or 'an unnamed type'}; a schema "
                    f"file must define the named type it is named for ({expected})"
                )
            parsed[name] = schema
            del pending[file_name]
            progress = True
        if not progress:
            file_name, type_name = next(iter(missing.items()))
            raise SchemaError(
                f"{path.name}/{file_name} uses type {type_name!r}, which no schema defines: "
                f"add {path.name}/{type_name}.avsc"
            )
    return Schemas(path, parsed, named, _history(path, named))


def _history(path: Path, named: dict[str, Any]) -> dict[str, list[tuple[int, Any]]]:
    """Earlier versions under `history/`: `<full.name>.v<N>.avsc`, oldest first."""
    versions: dict[str, list[tuple[int, Any]]] = {}
    for file in sorted((path / "history").glob("*.avsc")):
        name, _, number = file.name.removesuffix(".avsc").rpartition(".v")
        if not name or not number.isdigit():
            raise SchemaError(
                f"{path.name}/history/{file.name}: name earlier versions <full.name>.v<N>.avsc"
            )
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
            others = {n: s for n, s in named.items() if n != name and not n.startswith(name + ".")}
            schema = parse_schema(raw, named_schemas=others)
        except Exception as exc:
            raise SchemaError(f"{path.name}/history/{file.name} does not parse: {exc}") from None
        versions.setdefault(name, []).append((int(number), schema))
    return {name: sorted(v, key=lambda nv: nv[0]) for name, v in versions.items()}


@functools.cache
def default_schemas() -> Schemas:
    """The schemas of `schemas_dir()`, loaded once per process (`cache_clear()` to reload)."""
    return load_schemas()


def encoder_for(schema: str | None) -> Encoder:
    """Encoder of a stream's values: Avro single-object for a schema name, JSON for None.

    Raises SchemaError if `schemas/<schema>.avsc` does not exist.
    """
    if schema is None:
        return encode_json
    return default_schemas().encoder_for(schema)


def decoder_for(schema: str | None) -> Decoder:
    """Decoder of a stream's values: Avro single-object for a schema name, JSON for None.

    Raises SchemaError if `schemas/<schema>.avsc` does not exist.
    """
    if schema is None:
        return decode_json
    return default_schemas().decoder_for(schema)


# -- JSON ----------------------------------------------------------------------------------

_json_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_json_decoder = json.JSONDecoder()
_json_decode = _json_decoder.decode
_json_scan = _json_decoder.scan_once  # decode() less its two whitespace regexes


_ORJSON = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)
_orjson_dumps = orjson.dumps


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON; NaN, infinities and non-JSON types are an EncodeError.

    orjson writes it (a state document is sealed on every hook call that touches it: the
    standard library's encoder was the largest single cost there). Where orjson would differ
    from the standard library's strict JSON, the standard library decides: anything orjson
    refuses (integers past 64 bits, surrogates, sets...) and any output holding `null`,
    since orjson writes NaN and infinities as null where they must be refused. orjson also
    writes UUIDs and enums (as their string and value), which the standard library refused.
    """
    try:
        data = _orjson_dumps(value, option=_ORJSON)
        if b"null" not in data:
            return data
    except (TypeError, orjson.JSONEncodeError):
        pass
    try:
        return _json_encode(value).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise EncodeError(f"value is not JSON-serializable: {exc}") from exc


def decode_json(data: bytes | None) -> Any:
    """The value of UTF-8 JSON bytes; anything else is a DecodeError."""
    if data is None:
        raise DecodeError("no value (a tombstone) where a JSON value was expected")
    try:  # the per-record fast path: compact JSON with nothing around it
        text = data.decode("utf-8")
        value, end = _json_scan(text, 0)
        if end == len(text):
            return value
    except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
        pass
    try:
        return _json_decode(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        if data[:2] == MARKER:
            raise DecodeError(
                "value is Avro single-object encoded but the stream is declared without a "
                "schema: declare it with schema=<full name>"
            ) from None
        raise DecodeError(f"not UTF-8: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DecodeError(f"not JSON: {exc}") from None
    except RecursionError:
        raise DecodeError("JSON nested too deeply") from None


# -- error messages ------------------------------------------------------------------------


def _misfit(name: str, schema: Any, value: Any, exc: Exception) -> str:
    """Why `value` does not fit `schema`, naming the field when fastavro can tell."""
    if not isinstance(value, Mapping) and schema.get("type") == "record":
        return f"a {name} value must be a dict, not {type(value).__name__}"
    detail = f"{exc}"
    try:
        validate(value, schema, raise_errors=True, strict=False)
    except Exception as found:  # ValidationError lists "<type>.<field> is <x> ..." per field
        errors = getattr(found, "errors", None)
        if errors:
            detail = "; ".join(str(e) for e in errors)
    return f"value does not fit schema {name}: {detail}"


def _bad_marker(name: str, data: bytes) -> str:
    if not data:
        return f"empty value where a {name} was expected"
    if data[:1] in (b"{", b"[", b'"'):
        return (
            f"value looks like JSON but the stream's schema is {name}: producers must write "
            "Avro single-object encoding (C3 01 + fingerprint + body)"
        )
    return f"no Avro single-object marker C3 01 (starts {bytes(data[:2]).hex()}); expected a {name}"
