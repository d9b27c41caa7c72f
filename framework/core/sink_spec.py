"""Declaring a sink: a part that reads streams and writes their records into an outside system
(a database) exactly once, through that system's own transactions, each batch of a partition
with the partition's next offset (README, "Exactly-once into a database"). The declaration only
names and checks; `framework.sinks` has the protocol and the PostgreSQL sink,
`framework.streaming.sink_task` runs one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from framework.core.declarations import (
    DEFAULT_HOOK_TIMEOUT_MS,
    Input,
    PipelineError,
    check_name,
    check_stream,
)
from framework.core.part import GROUP_OPERATIONS, READ_OPERATIONS, Grant, Graph, OwnTopic, literal

SINK_METHODS = ("open", "write", "close")
DLQ_OPERATIONS = ("WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")
"""On its dead-letter topic: `run` creates it if missing and reads its limits from its configs."""


@dataclass(frozen=True)
class SinkSpec:
    """One declared sink: its name, the streams it reads (in their Kafka partitions, by their
    Kafka key) and the `framework.sinks.Sink` that writes them."""

    pipeline: str
    name: str
    inputs: tuple[Input, ...]
    sink: Any  # a framework.sinks.Sink (the core imports no sink: it only checks the shape)

    kind = "sink"
    runtime = "sink"
    replayable = False  # its dead letters are rows its target refused: fixed there, not re-run
    queryable = False
    on_error = "dead_letter"
    outputs: ClassVar[Mapping[str, str | None]] = MappingProxyType({})  # it writes no stream
    formats: ClassVar[Mapping[str, str]] = MappingProxyType({})
    partitions = 0  # it keeps no state, so it has no key space
    watermarks = None
    keyed_topics: ClassVar[tuple[str, ...]] = ()
    hook_timeout_ms = DEFAULT_HOOK_TIMEOUT_MS
    """The watchdog's bounds: a sink runs no hook per record, so only its loop's stall counts
    (a write blocked past every bound it was given ends the membership)."""

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
        return [i.stream for i in self.inputs]

    @property
    def subscribed_topics(self) -> list[str]:
        return self.consumed_topics

    @property
    def node(self) -> str:
        return f"k:{self.name}"

    @property
    def detail(self) -> str:
        return type(self.sink).__name__

    def own_topics(self) -> list[OwnTopic]:
        return [OwnTopic(self.dlq, "dlq", 1, "dlq", False)]

    def tables_read(self) -> list[tuple[str, str, str]]:
        return []

    def grants(self, graph: Graph, *, reset: bool = False) -> list[Grant]:
        """Read on its inputs and its group, Write on its dead-letter topic (which it creates
        if missing); it writes nothing else on Kafka and commits no transaction there."""
        return [
            Grant("TOPIC", "LITERAL", self.dlq, DLQ_OPERATIONS),
            Grant("GROUP", "LITERAL", self.group, GROUP_OPERATIONS),
            *literal(self.consumed_topics, READ_OPERATIONS),
        ]


def sink_spec(pipeline: str, name: str, inputs: Mapping[str, None], sink: Any) -> SinkSpec:
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
    return SinkSpec(pipeline, name, tuple(Input(s, None) for s in streams), sink)
