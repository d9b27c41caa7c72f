"""Codecs for stream values and internal records: UTF-8 JSON, or Avro single-object encoding.

A stream declared without a schema carries compact UTF-8 JSON. A stream declared with a
schema carries Avro single-object encoding (Avro spec, "Single-object encoding"):

    C3 01 | CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form, 8 bytes
          little-endian | Avro binary body

The fingerprint makes every value self-describing without a schema registry: the schema
search path (serde/schemas.py), one `<full.name>.avsc` file per named type, is the only
registry there is. A reader looks
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
from fastavro.schema import parse_schema
from fastavro.validation import validate

from framework.errors import BadRecord
from framework.serde.bounds import Check, OutOfBounds, Truncated, bound
from framework.serde.schemas import (
    SCHEMAS_ENV,
    SchemaError,
    canonical_form,
    fingerprint_of,
    own_schemas,
    read_directories,
    search_path,
)

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


Encoder = Callable[[Any], bytes]
Decoder = Callable[[bytes], Any]


class EncodeError(BadRecord):
    """A value that does not fit its stream's schema (or is not JSON-serializable)."""

    def __init__(self, reason: str) -> None:
        super().__init__("encode", reason)


class DecodeError(BadRecord):
    """Bytes that are not a value of the stream; the message is the dead letter's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__("decode", reason)


# -- locating and loading schemas ---------------------------------------------------------


class Schemas(Mapping[str, Any]):
    """The named Avro types of the schema directories, parsed, fingerprinted, with codecs.

    A mapping from full name to fastavro's parsed schema. Codecs are built once per name
    and cached: the per-record path only writes or reads bytes.
    """

    def __init__(
        self,
        directories: list[Any],
        parsed: dict[str, Any],
        named: dict[str, Any],
        history: dict[str, list[tuple[int, Any]]] | None = None,
    ) -> None:
        self.directories = directories  # where the types were read, logwheel's own first
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
        self._bounds: dict[bytes, Check | None] = {}  # writer fingerprint -> its values' check
        self._lock = threading.Lock()

    # Mapping
    def __getitem__(self, name: str) -> Any:
        try:
            return self._parsed[name]
        except KeyError:
            searched = ", ".join(str(d) for d in self.directories[1:]) or "no directory"
            raise SchemaError(
                f"no schema {name!r}: expected a file {name}.avsc defining it; searched "
                f"{searched} (add it there, or name its directory in {SCHEMAS_ENV}, "
                "':'-separated)"
            ) from None

    def __contains__(self, name: object) -> bool:  # Mapping's would raise SchemaError
        return name in self._parsed

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsed)

    def __len__(self) -> int:
        return len(self._parsed)

    @property
    def named(self) -> Mapping[str, Any]:
        """fastavro's named types of every loaded schema, by full name."""
        return self._named

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
        return avro_encoder(name, self[name], self.header(name))

    def _bound(self, fp: bytes, label: str, writer: Any) -> Check | None:
        """The check values of this writer schema need before fastavro reads them, vetted
        once (framework/serde/bounds.py): a job's own schema may be recursive or hold arrays,
        and the bytes come from whoever may write the topic."""
        if fp not in self._bounds:
            named = writer.get("__named_schemas") if isinstance(writer, dict) else None
            self._bounds[fp] = bound(writer, named or self._named, f"writer schema {label}")
        return self._bounds[fp]

    def _make_decoder(self, name: str) -> Decoder:
        reader = self[name]
        # writer fingerprint -> (writer name, writer schema, reader schema or None if same,
        # the check of its values)
        plans: dict[bytes, tuple[str, Any, Any, Check | None]] = {}
        for fp, n in self._by_fingerprint.items():
            writer_name, writer = self._older.get(fp) or (n, self._parsed[n])
            resolve_to = None if writer_name == name else reader
            plans[fp] = (writer_name, writer, resolve_to, self._bound(fp, writer_name, writer))

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
            writer_name, writer, resolve_to, check = plan
            buf = BytesIO(data)
            buf.seek(HEADER_SIZE)
            try:
                if check is not None:  # bytes whose reading fastavro would not bound
                    check(data, HEADER_SIZE)
                value = schemaless_reader(buf, writer, resolve_to)
            except (EOFError, Truncated):
                raise DecodeError(f"truncated {writer_name} body ({len(data)} bytes)") from None
            except OutOfBounds as exc:
                raise DecodeError(str(exc)) from None
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


def avro_encoder(name: str, schema: Any, header: bytes) -> Encoder:
    """Encoder of values of the parsed schema `name`: `header` then the Avro binary body.

    Single-object encoding and the Confluent wire format differ only in their header. The
    compiled fastavro writer is called directly when there is one: `schemaless_writer`
    would check the schema on every call."""
    if _write_data is not None:
        named: dict[str, Any] = {}
        parsed = parse_schema(schema, named_schemas=named)
        fields = _record_fields(parsed)
        names = frozenset(field[0] for field in fields or ())

        def encode_compiled(value: Any) -> bytes:
            out = bytearray(header)
            try:
                if fields is None:
                    _write_data(out, value, parsed, named, "", _WRITE_OPTIONS)
                else:  # a record, field by field (_record_fields)
                    if not value.keys() <= names:
                        raise ValueError(_extra_fields(value, names))
                    for field, kind, has_default, default, cast in fields:
                        if field in value:
                            item = value[field]
                        elif has_default:
                            item = default
                        else:
                            raise ValueError(f"no value for field {field} (it has no default)")
                        item = float(item) if cast else item
                        _write_data(out, item, kind, named, field, _WRITE_OPTIONS)
            except Exception as exc:
                raise EncodeError(_misfit(name, parsed, value, exc)) from exc
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


_Field = tuple[str, Any, bool, Any, bool]
"""(name, type, has a default, the default, cast to float): a record field as the encoder
writes it."""


def _record_fields(parsed: Any) -> list[_Field] | None:
    """The fields of a record schema for its encoder, None for any other schema. The encoder
    writes a record field by field with fastavro's compiled writer, doing what its record
    writer does under `strict_allow_default` (no field beyond the schema, none missing but
    those with a default, floats cast): that writer walked the record's schema on every call,
    which cost more than writing the fields (0.93 -> 0.68 us for wordcount.WordCount)."""
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return None
    return [
        (f["name"], f["type"], "default" in f, f.get("default"), f["type"] in ("float", "double"))
        for f in parsed["fields"]
    ]


def _extra_fields(value: Any, names: frozenset[str]) -> str:
    extras = ", ".join(str(k) for k in value if k not in names)
    return f"fields beyond the schema: {extras}"


def load_schemas(*directories: str | os.PathLike[str]) -> Schemas:
    """logwheel's own types and those of `directories` (default: the search path), parsed
    into one `Schemas`."""
    found = [Path(d) for d in directories] if directories else search_path()
    sources = [own_schemas(), *found]
    parsed, named, history = read_directories(sources)
    return Schemas(sources, parsed, named, history)


@functools.cache
def default_schemas() -> Schemas:
    """The schemas of the search path, loaded once per process (`cache_clear()` to reload)."""
    return load_schemas()


def encoder_for(schema: str | None) -> Encoder:
    """Encoder of a stream's values: Avro single-object for a schema name, JSON for None.

    Raises SchemaError if no `<schema>.avsc` is on the search path.
    """
    if schema is None:
        return encode_json
    return default_schemas().encoder_for(schema)


def decoder_for(schema: str | None) -> Decoder:
    """Decoder of a stream's values: Avro single-object for a schema name, JSON for None.

    Raises SchemaError if no `<schema>.avsc` is on the search path.
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


def encode_json_vetted(value: Any) -> bytes:
    """Compact UTF-8 JSON of a value made only of pieces `encode_json` accepted one by one (a
    state document its computation vetted as it grew, keyed_state.py): orjson alone, without
    `encode_json`'s scan for `null` (a vetted piece holds no NaN) nor its refusal of what only
    orjson writes (a vetted piece may hold a UUID beside another's null); the standard library
    where orjson refuses (nesting deeper than its limit)."""
    try:
        return _orjson_dumps(value, option=_ORJSON)
    except (TypeError, orjson.JSONEncodeError):
        return encode_json(value)


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
    if data[:1] == b"\x00" and len(data) >= 5:  # never JSON: a zero byte and a schema id
        raise DecodeError(
            f"value is in the Confluent wire format (schema id {int.from_bytes(data[1:5], 'big')})"
            ", not JSON: read the stream with a Schema Registry (Pipeline(name, registry=URL))"
        )
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
