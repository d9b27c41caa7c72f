"""The codec of each stream of a pipeline, by its format: UTF-8 JSON (no schema), Avro
single-object encoding (a schema), or the Confluent wire format against a Schema Registry
(`format="confluent"`, or any stream with a schema once the pipeline has a registry).

The streaming tasks ask here instead of `framework.serde.codecs` directly: the wire format
needs a registry client, which lives at this layer (the serde layer imports no Kafka client).
`settings` is the `[registry]` table of the run's config file, if any; the registry itself is
resolved from it, the pipeline and the environment (framework/kafka/registry_settings.py).
A stream's topic is its name, so its subject is `<stream>-value` under the default strategy.
"""

from __future__ import annotations

from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.kafka.registry_settings import RegistrySettings, resolve
from framework.kafka.schema_registry import RegistryError, RegistryUnavailable, connect, wire_format
from framework.serde.codecs import Decoder, Encoder, decoder_for, encoder_for


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
    """Decoder of `stream`'s values to its declared schema (JSON when it has none)."""
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
        if schema is None:
            raise PipelineError(
                f"stream {stream!r} is written in the Confluent wire format but has no "
                "schema: declare one"
            )
        return wire_format(registry).encoder(stream, schema)
    return encoder_for(schema)


def check_registry(
    pipeline: Pipeline, spec: ComputationSpec, settings: RegistrySettings | None = None
) -> None:
    """At start: a computation with a stream in the wire format needs its registry to answer
    (`RegistryError` naming the URL otherwise) and its outputs' schemas accepted under their
    subjects, before it joins its group."""
    streams = [*(i.stream for i in spec.inputs), *spec.outputs]
    wired = [s for s in streams if _wired(pipeline, s, settings) is not None]
    if not wired:
        return
    registry = _wired(pipeline, wired[0], settings)
    assert registry is not None
    connect(registry)
    try:
        for stream in spec.outputs:
            if stream in wired:
                stream_encoder(pipeline, stream, settings)
    except RegistryUnavailable as error:  # went away since the ping: still the start
        raise RegistryError(str(error)) from None
