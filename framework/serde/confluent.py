"""The Confluent wire format: Avro values framed for a Schema Registry.

    00 | schema id, 4 bytes big-endian | Avro binary body

This is what every Confluent serializer (Java, confluent-kafka, Kafka Streams' `SpecificAvroSerde`)
writes and reads: the id names the writer schema in a registry. A reader fetches the writer schema
by id (once per id) and resolves it against the stream's declared schema, as Avro schema
resolution says; a writer registers its schema under its subject (by default the topic's,
`<topic>-value`, Confluent's TopicNameStrategy; the subject namer is handed in) once at start
and prefixes every body with the id it got.

This module is the pure part: framing, reading the header, and encoders and decoders built on
fastavro with parsed schemas cached per id. Talking to the registry is someone else's job (the
`SchemaSource` handed in, see framework/kafka/schema_registry.py): the serde layer must not
import Kafka clients. Bad bytes raise `DecodeError` with a reason that names the id where
there is one, and the runtime dead-letters them at stage "decode".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from io import BytesIO
from typing import Any, Protocol

from fastavro import schemaless_reader
from fastavro.schema import parse_schema

from framework.errors import ConfigurationError
from framework.serde.avro_codec import avro_encoder
from framework.serde.bounds import Check, OutOfBounds, Truncated, bound, refusal
from framework.serde.catalogue import Schemas
from framework.serde.codecs import DecodeError, Decoder, Encoder
from framework.serde.schemas import self_contained

MAGIC = 0
"""The first byte of every value in the wire format."""

HEADER_SIZE = 5
"""Magic byte plus the 4-byte schema id."""

CACHE_SIZE = 1000
"""How many writer schemas (by id) a `WireFormat`, and each of its decoders, keeps parsed:
confluent-kafka's own default `cache.capacity`; the oldest goes first, so records framed with
ever new ids cannot grow memory without bound."""

_SENTINEL = b"\x00"


class UnknownSchemaId(DecodeError, LookupError):
    """The registry has no schema with this id (a `SchemaSource` raises it): a record that
    names it is a dead letter, never a retry, since the id will not appear later (the decoder
    says so with the topic and the registry's URL)."""

    def __init__(self, schema_id: int) -> None:
        super().__init__(f"no schema with id {schema_id} in the registry")
        self.schema_id = schema_id


class SchemaSource(Protocol):
    """What the wire format needs of a registry: schemas by id, and ids for schemas."""

    url: str

    def schema(self, schema_id: int) -> str:
        """The schema text (Avro JSON) registered with `schema_id`; `UnknownSchemaId` if none."""
        ...

    def register(self, subject: str, schema: str) -> int:
        """The id of `schema` under `subject`, registering it as the subject's next version if
        the subject does not have it yet (the registry checks compatibility)."""
        ...


def frame(schema_id: int, body: bytes) -> bytes:
    """A value in the wire format: the zero byte, the id (4 bytes big-endian), the body."""
    return header(schema_id) + body


def header(schema_id: int) -> bytes:
    """The 5-byte header of values written with schema `schema_id`."""
    if not 0 <= schema_id < 2**31:
        raise ConfigurationError(
            f"schema id {schema_id} does not fit the wire format's 4 signed bytes: no Confluent "
            "reader could read it; the registry that gave it is not one a client can use"
        )
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big")


def read_header(data: bytes | None) -> int:
    """The schema id of a wire-format value; `DecodeError` naming what is wrong if it is not
    one (no value, a wrong magic byte, fewer than 5 bytes)."""
    if data is None:
        raise DecodeError("no value (a tombstone) where a Confluent wire-format value was expected")
    if len(data) < HEADER_SIZE:
        if data[:1] not in (b"", b"\x00"):
            raise DecodeError(_bad_magic(data))
        raise DecodeError(
            f"truncated: {len(data)} bytes, shorter than the wire format's 5-byte header"
        )
    if data[0] != MAGIC:
        raise DecodeError(_bad_magic(data))
    schema_id = int.from_bytes(data[1:HEADER_SIZE], "big", signed=True)  # Java's int
    if schema_id < 0:
        raise DecodeError(f"negative schema id {schema_id}: no registry gives one")
    return schema_id


def subject_of(topic: str) -> str:
    """The subject of a topic's values under Confluent's TopicNameStrategy."""
    return f"{topic}-value"


def registered_form(schema: Any, named: Mapping[str, Any]) -> str:
    """A parsed schema as the JSON a registry keeps: self-contained (named types defined in
    other files inlined at their first use), docs, defaults and aliases kept — the registry
    checks compatibility with them, which the Parsing Canonical Form would strip."""
    return json.dumps(self_contained(schema, named), separators=(",", ":"))


class WireFormat:
    """Encoders and decoders of the Confluent wire format against one registry, with writer
    schemas parsed once per id and shared by every decoder."""

    def __init__(
        self,
        source: SchemaSource,
        schemas: Schemas,
        subject: Callable[[str, str], str] = lambda topic, _name: subject_of(topic),
    ) -> None:
        self.source = source
        self.schemas = schemas
        self.subject = subject  # (topic, record full name) -> the subject writers register under
        # schema id -> (parsed writer schema, None once refused; the check of its values)
        self._writers: dict[int, tuple[Any, Check | None]] = {}
        self._lock = threading.Lock()

    def encoder(self, topic: str, name: str) -> Encoder:
        """Encoder of values of schema `name` written to `topic`: its schema registered (or
        looked up) under its subject now, once; then header + body per value."""
        text = registered_form(self.schemas[name], self.schemas.named)
        schema_id = self.source.register(self.subject(topic, name), text)
        return avro_encoder(name, self.schemas[name], header(schema_id))

    def decoder(self, topic: str, name: str | None) -> Decoder:
        """Decoder of `topic`'s values to schema `name` (None: as each writer wrote them)."""
        reader = self.schemas[name] if name is not None else None
        # id -> (writer, reader or None when the same, the check of its values)
        plans: dict[int, tuple[Any, Any, Check | None]] = {}
        wanted = name or "the writer's schema"

        def plan_of(schema_id: int) -> tuple[Any, Any, Check | None]:
            writer, check = self.writer(schema_id, topic)
            same = reader is None or writer is None
            same = same or _same_type(writer, reader, self.schemas.named)
            if len(plans) >= CACHE_SIZE:
                plans.clear()
            plans[schema_id] = plan = (writer, None if same else reader, check)
            return plan

        def decode(data: bytes) -> Any:
            schema_id = read_header(data)
            writer, resolve_to, check = plans.get(schema_id) or plan_of(schema_id)
            # fastavro reads a string or bytes cut short without complaint: one byte past the
            # end shows it, since a whole value never reads beyond its last byte.
            buf = BytesIO(data + _SENTINEL)
            buf.seek(HEADER_SIZE)
            try:
                if check is not None:  # bytes whose reading fastavro would not bound
                    check(data, HEADER_SIZE)
                value = schemaless_reader(buf, writer, resolve_to)
            except (EOFError, Truncated):
                raise DecodeError(_truncated(data, schema_id)) from None
            except OutOfBounds as exc:
                raise DecodeError(str(exc)) from None
            except Exception as exc:
                raise DecodeError(
                    f"cannot read schema id {schema_id} as {wanted}: {type(exc).__name__}: {exc}"
                ) from exc
            end = buf.tell()
            if end > len(data):
                raise DecodeError(_truncated(data, schema_id))
            if end < len(data):
                raise DecodeError(
                    f"{len(data) - end} trailing bytes after the body (schema id {schema_id})"
                )
            return value

        return decode

    def writer(self, schema_id: int, topic: str) -> tuple[Any, Check | None]:
        """The parsed writer schema of `schema_id` (None if refused) and the check its values
        need (framework/serde/bounds.py), fetched from the registry and vetted once."""
        writer = self._writers.get(schema_id)
        if writer is not None:
            return writer
        try:
            text = self.source.schema(schema_id)
        except UnknownSchemaId:
            raise DecodeError(
                f"unknown schema id {schema_id}: the registry at {self.source.url} has no "
                f"such schema (topic {topic})"
            ) from None
        named: dict[str, Any] = {}
        try:
            parsed = parse_schema(json.loads(text), named_schemas=named)
            vetted = (parsed, bound(parsed, named, f"writer schema id {schema_id}"))
        except Exception as exc:
            reason = f"schema id {schema_id} from {self.source.url} does not parse as Avro: {exc}"
            vetted = (None, refusal(reason))
        with self._lock:
            if len(self._writers) >= CACHE_SIZE:
                del self._writers[next(iter(self._writers))]
            return self._writers.setdefault(schema_id, vetted)


def _same_type(writer: Any, reader: Any, named: Mapping[str, Any]) -> bool:
    """Whether a writer schema is the reader's own, so values need no resolution (fastavro
    reads faster without a reader schema)."""
    return json.loads(registered_form(writer, {})) == json.loads(registered_form(reader, named))


def _truncated(data: bytes, schema_id: int) -> str:
    return f"truncated body: {len(data)} bytes end inside a value of schema id {schema_id}"


def _bad_magic(data: bytes) -> str:
    first = bytes(data[:2]).hex()
    if bytes(data[:2]) == b"\xc3\x01":
        return (
            "wrong magic byte: the value is Avro single-object encoded (C3 01), not the "
            "Confluent wire format: declare the stream without format='confluent'"
        )
    if data[:1] in (b"{", b"["):
        return "wrong magic byte: the value looks like JSON, not the Confluent wire format"
    return f"wrong magic byte 0x{first[:2]} (expected 0x00 of the Confluent wire format)"
