"""Codecs for stream values and internal records: UTF-8 JSON, or Avro single-object encoding.

A stream declared without a schema carries compact UTF-8 JSON (serde/json_codec.py). A stream
declared with a schema carries Avro single-object encoding (serde/avro_codec.py), which makes
every value self-describing by its writer schema's fingerprint: the schema catalogue
(serde/catalogue.py) looks the writer schema up and resolves it to the schema the stream is
declared with, and gives each stream its codec.

A codec is a pair of functions, value to bytes and bytes to value. Bad configuration (a schema
name with no file) fails at start with `SchemaError`; a value that does not fit its schema
fails the producing hook with `EncodeError`; a record that cannot be decoded raises
`DecodeError`, whose message the runtime puts in the dead letter's headers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framework.errors import BadRecord

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
