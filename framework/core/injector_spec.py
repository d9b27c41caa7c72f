"""An injector as a part of its pipeline: the process (or processes) that write source streams
declared with `InjectorWatermark(name)` and promise their low watermark
(framework/streaming/injector.py runs one). It is declared through those sources, not on its
own, and runs in its user's program, not under `logwheel run`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from framework.core.declarations import Input
from framework.core.part import (
    TRANSACTION_OPERATIONS,
    WRITE_OPERATIONS,
    Grant,
    Graph,
    OwnTopic,
    literal,
)


@dataclass(frozen=True)
class InjectorSpec:
    """Injector `name` of `pipeline`: the streams it writes, and how many processes run it."""

    pipeline: str
    name: str
    streams: tuple[str, ...]
    processes: int

    kind = "injector"
    runtime = None
    group = None
    dlq = None
    replayable = False
    queryable = False
    inputs: ClassVar[tuple[Input, ...]] = ()
    outputs: ClassVar[Mapping[str, str | None]] = MappingProxyType({})  # its streams: sources
    formats: ClassVar[Mapping[str, str]] = MappingProxyType({})
    consumed_topics: ClassVar[tuple[str, ...]] = ()
    subscribed_topics: ClassVar[tuple[str, ...]] = ()
    keyed_topics: ClassVar[tuple[str, ...]] = ()
    partitions = 0
    node = None
    detail = ""

    @property
    def watermarks(self) -> str:
        """Its watermark channel: the promises of each of its processes."""
        return f"{self.pipeline}.{self.name}.watermarks"

    @property
    def transactional_prefix(self) -> str:
        """What its processes' transactional ids start with."""
        return f"{self.pipeline}.{self.name}.injector-"

    def own_topics(self) -> list[OwnTopic]:
        return [OwnTopic(self.watermarks, "watermarks", 1, "compact", True)]

    def tables_read(self) -> list[tuple[str, str, str]]:
        return []

    def grants(self, graph: Graph, *, reset: bool = False) -> list[Grant]:
        """Write on its streams and its own watermark channel (which it may create), its
        transactional ids; nothing else."""
        return [
            *literal({*self.streams, self.watermarks}, WRITE_OPERATIONS),
            Grant("TOPIC", "LITERAL", self.watermarks, ("CREATE",)),
            Grant("TRANSACTIONAL_ID", "PREFIXED", self.transactional_prefix,
                  TRANSACTION_OPERATIONS),
        ]  # fmt: skip
