"""Compact UTF-8 JSON: the codec of a stream declared without a schema, and of the documents
the runtime keeps state in.

Strict JSON as the standard library writes it (no NaN nor infinities, which other readers
could not parse). The decoder says what the bytes are when they are not JSON (Avro
single-object encoded, or the Confluent wire format): a stream read with the wrong format.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from framework.serde.avro_codec import MARKER
from framework.serde.codecs import DecodeError, EncodeError

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
