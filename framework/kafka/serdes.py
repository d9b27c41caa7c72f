"""The codec of each stream of a pipeline, by its format: UTF-8 JSON (no schema), Avro
single-object encoding (a schema), or the Confluent wire format against a Schema Registry
(`format="confluent"`, or any stream with a schema once the pipeline has a registry).

The streaming tasks ask here instead of `framework.serde.codecs` directly: the wire format
needs a registry client, which lives at this layer (the serde layer imports no Kafka client).
A stream's topic is its name, so its subject is `<stream>-value`.
"""

from __future__ import annotations

import dataclasses

from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.kafka.schema_registry import connect, registry_url, wire_format
from framework.serde.codecs import Decoder, Encoder, decoder_for, encoder_for


def _registry(pipeline: Pipeline, stream: str) -> str:
    url = registry_url(pipeline.registry)
    if url is None:
        raise PipelineError(
            f"stream {stream!r} is in the Confluent wire format but the pipeline has no "
            "Schema Registry: give it one with Pipeline(name, registry=URL) or "
            "LOGWHEEL_SCHEMA_REGISTRY=URL"
        )
    return url


def stream_decoder(pipeline: Pipeline, stream: str) -> Decoder:
    """Decoder of `stream`'s values to its declared schema (JSON when it has none)."""
    schema = pipeline.schema_of(stream)
    if pipeline.format_of(stream, registry_url(pipeline.registry)) == "confluent":
        return wire_format(_registry(pipeline, stream)).decoder(stream, schema)
    return decoder_for(schema)


def stream_encoder(pipeline: Pipeline, stream: str) -> Encoder:
    """Encoder of `stream`'s values; in the wire format its schema is registered (or looked up)
    under `<stream>-value` first."""
    schema = pipeline.schema_of(stream)
    if pipeline.format_of(stream, registry_url(pipeline.registry)) == "confluent":
        if schema is None:
            raise PipelineError(
                f"stream {stream!r} is written in the Confluent wire format but has no "
                "schema: declare one"
            )
        return wire_format(_registry(pipeline, stream)).encoder(stream, schema)
    return encoder_for(schema)


def check_registry(pipeline: Pipeline, spec: ComputationSpec) -> None:
    """At start: a computation with a stream in the wire format needs its registry to answer
    (`RegistryError` naming the URL otherwise) and its outputs' schemas accepted under their
    subjects, before it joins its group."""
    registry = registry_url(pipeline.registry)
    streams = [*(i.stream for i in spec.inputs), *spec.outputs]
    wired = [s for s in streams if pipeline.format_of(s, registry) == "confluent"]
    if not wired:
        return
    connect(_registry(pipeline, wired[0]))
    for stream in spec.outputs:
        if stream in wired:
            stream_encoder(pipeline, stream)


def pin_registry(pipeline: Pipeline) -> Pipeline:
    """The pipeline with the registry it runs against written into it (its own, else
    `LOGWHEEL_SCHEMA_REGISTRY` as this process sees it), for processes that do not share this
    one's environment: the backfill's Spark executors get the URL, never a client."""
    url = registry_url(pipeline.registry)
    return pipeline if url == pipeline.registry else dataclasses.replace(pipeline, registry=url)
