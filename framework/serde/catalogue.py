"""The schema catalogue: the named Avro types of logwheel's own schemas and a job's schema
directories, parsed and fingerprinted, with a codec per name built once and cached, and the
catalogue of the search path that a process loads once.

A reader looks a value's writer schema up here by its fingerprint, current or earlier version
(`history/`), and resolves it to the schema the stream is declared with; a stream declared
without a schema gets the JSON codec.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from framework.serde.avro_codec import HEADER_SIZE, MARKER, Writer, avro_decoder, avro_encoder
from framework.serde.bounds import Check, bound
from framework.serde.codecs import Decoder, Encoder
from framework.serde.json_codec import decode_json, encode_json
from framework.serde.schemas import (
    SCHEMAS_ENV,
    SchemaError,
    canonical_form,
    fingerprint_of,
    own_schemas,
    read_directories,
    search_path,
)


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
        plans: dict[bytes, Writer] = {}  # by the writer schema's fingerprint
        for fp, n in self._by_fingerprint.items():
            writer_name, writer = self._older.get(fp) or (n, self._parsed[n])
            resolve_to = None if writer_name == name else reader
            plans[fp] = (writer_name, writer, resolve_to, self._bound(fp, writer_name, writer))
        return avro_decoder(name, plans)


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
