"""Declaring a sink: a consumer of streams that writes their records into an outside system
(a database) exactly once, through that system's own transactions (CONTRACT.md, "Exactly-once
into a database"). The declaration only names and checks; `framework.sinks` has the protocol
and the PostgreSQL sink, `framework.streaming.sink_loop` runs one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework.core.declarations import PipelineError, check_name, check_stream

SINK_METHODS = ("open", "write", "close")


@dataclass(frozen=True)
class SinkSpec:
    """One declared sink: its name, the streams it reads (in their Kafka partitions, by their
    Kafka key) and the `framework.sinks.Sink` that writes them."""

    pipeline: str
    name: str
    inputs: tuple[str, ...]
    sink: Any  # a framework.sinks.Sink (the core imports no sink: it only checks the shape)

    @property
    def group(self) -> str:
        """Its consumer group."""
        return f"{self.pipeline}.{self.name}"

    @property
    def dlq(self) -> str:
        """Rows the target refused and records that could not be decoded, with the reason."""
        return f"{self.group}.dlq"

    @property
    def consumed_topics(self) -> list[str]:
        return list(self.inputs)


def sink_spec(
    pipeline: str, name: str, inputs: Mapping[str, None] | list[str], sink: Any
) -> SinkSpec:
    """A checked `SinkSpec`; a one-line `PipelineError` naming the fix otherwise."""
    check_name("sink", name)
    streams = list(inputs)
    if not streams:
        raise PipelineError(f"sink {name!r} needs at least one input stream: inputs={{'s': None}}")
    for stream in streams:
        check_stream(stream)
    if isinstance(inputs, Mapping):
        for stream, key in inputs.items():
            if key is not None:
                raise PipelineError(
                    f"sink {name!r}: input {stream!r} is given a key extractor; a sink reads "
                    "each stream as it is partitioned: give None"
                )
    missing = [m for m in SINK_METHODS if not callable(getattr(sink, m, None))]
    if missing:
        raise PipelineError(
            f"sink {name!r}: sink={sink!r} lacks {', '.join(missing)}: give a "
            "framework.sinks.PostgresSink(...) or an object with open, write and close "
            "(framework.sinks.Sink)"
        )
    return SinkSpec(pipeline, name, tuple(streams), sink)
