"""The codec of each stream of a pipeline, by its format (`Pipeline.format_of`): UTF-8 JSON
(no schema), Avro single-object encoding (a schema), or the Confluent wire format against a
Schema Registry (`format="confluent"`, or any stream that names no format once the pipeline
has a registry: a source without a schema is then read as its writers wrote it, and
`format="json"` keeps a stream JSON).

The streaming tasks, table replicas and `ChangelogTable` ask here instead of
`framework.serde.catalogue` directly: the wire format needs a registry client, which lives at this
layer (the serde layer imports no Kafka client).
`settings` is the `[registry]` table of the run's config file, if any; the registry itself is
resolved from it, the pipeline and the environment (framework/kafka/registry_settings.py).
A stream's topic is its name, so its subject is `<stream>-value` under the default strategy.
"""

from __future__ import annotations

from framework.core.declarations import check_wire_schema
from framework.core.part import Part
from framework.core.pipeline import Pipeline, PipelineError
from framework.kafka.registry_settings import RegistrySettings, resolve
from framework.kafka.schema_registry import (
    RegistryConfigurationError,
    RegistryUnavailable,
    connect,
    wire_format,
)
from framework.serde.catalogue import decoder_for, default_schemas, encoder_for
from framework.serde.codecs import Decoder, Encoder
from framework.serde.confluent import MAGIC

_MAGIC = bytes([MAGIC])


def _wired(
    pipeline: Pipeline, stream: str, settings: RegistrySettings | None
) -> RegistrySettings | None:
    """The registry of `stream` if it is in the wire format, else None."""
    registry = resolve(pipeline, settings)
    if pipeline.format_of(stream, registry and registry.url) != "confluent":
        return None
    if registry is None:
        raise PipelineError(
            f"stream {stream!r} is in the Confluent wire format but the pipeline has no "
            "Schema Registry: give it one with Pipeline(name, registry=URL), [registry] url "
            "in --config, or LOGWHEEL_SCHEMA_REGISTRY=URL"
        )
    return registry


def stream_decoder(
    pipeline: Pipeline, stream: str, settings: RegistrySettings | None = None
) -> Decoder:
    """Decoder of `stream`'s values to its declared schema: without one, JSON, or in the wire
    format each value as its writer wrote it."""
    schema = pipeline.schema_of(stream)
    registry = _wired(pipeline, stream, settings)
    if registry is not None:
        return wire_format(registry).decoder(stream, schema)
    return decoder_for(schema)


def stream_encoder(
    pipeline: Pipeline, stream: str, settings: RegistrySettings | None = None
) -> Encoder:
    """Encoder of `stream`'s values; in the wire format its schema is registered (or looked up)
    under its subject first."""
    schema = pipeline.schema_of(stream)
    registry = _wired(pipeline, stream, settings)
    if registry is not None:
        check_wire_schema(stream, "confluent", schema)
        return wire_format(registry).encoder(stream, schema)
    return encoder_for(schema)


def table_decoder(
    pipeline: Pipeline, topic: str, settings: RegistrySettings | None = None
) -> Decoder:
    """Decoder of the values of a table's topic. A stream of the pipeline in the wire format
    (`format="confluent"`, or no format under a pipeline with a registry) reads as its stream
    does: writer schema by id, resolved to the declared one if any. Any other topic is read
    as each value describes itself (`any_decoder`), so another team's changelog needs no
    declaration."""
    registry = resolve(pipeline, settings)
    declared = topic in pipeline.streams()
    if declared and pipeline.format_of(topic, registry and registry.url) == "confluent":
        return stream_decoder(pipeline, topic, settings)
    return any_decoder(registry, topic)


def any_decoder(registry: RegistrySettings | None, topic: str) -> Decoder:
    """Decoder of values that describe themselves: Avro single-object by its fingerprint, else
    JSON (`Schemas.decode_any`); with a registry, also a value starting with the wire format's
    zero byte, read with the writer schema its id names (the reader is the writer). The
    registry is asked once now, so one that does not answer fails here in one line."""
    decode_any = default_schemas().decode_any
    if registry is None:
        return decode_any
    wired = wire_format(registry).decoder(topic, None)

    def decode(data: bytes | None) -> object:
        if data is not None and data[:1] == _MAGIC:
            return wired(data)
        return decode_any(data)

    return decode


def check_registry(
    pipeline: Pipeline, spec: Part, settings: RegistrySettings | None = None
) -> None:
    """At start: a part with a stream or table in the wire format (or any table, once the
    pipeline has a registry) needs its registry to answer (`RegistryConfigurationError` naming
    the URL otherwise) and its outputs' schemas accepted under their subjects, before it joins
    its group."""
    tables = [topic for _, topic, _ in spec.tables_read()]
    streams = [*(i.stream for i in spec.inputs), *spec.outputs, *tables]
    wired = [s for s in streams if _wired(pipeline, s, settings) is not None]
    if not wired:
        registry = resolve(pipeline, settings)
        if registry is not None and tables:
            connect(registry)
        return
    registry = _wired(pipeline, wired[0], settings)
    assert registry is not None
    connect(registry)
    try:
        for stream in spec.outputs:
            if stream in wired:
                stream_encoder(pipeline, stream, settings)
    except RegistryUnavailable as error:  # went away since the ping: still the start
        raise RegistryConfigurationError(str(error)) from None
