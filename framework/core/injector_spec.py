"""An injector as a part of its pipeline: the process (or processes) that write source streams
declared with `InjectorWatermark(name)` and promise their low watermark
(framework/streaming/injector.py runs one). It is declared through those sources, not on its
own, and runs in its user's program, not under `logwheel run`."""

from __future__ import annotations

from dataclasses import dataclass

from framework.core.part import (
    TRANSACTION_OPERATIONS,
    WRITE_OPERATIONS,
    Grant,
    Graph,
    OwnTopic,
    Unrun,
    literal,
)


@dataclass(frozen=True)
class InjectorSpec(Unrun):
    """Injector `name` of `pipeline`: the streams it writes, and how many processes run it."""

    pipeline: str
    name: str
    streams: tuple[str, ...]
    processes: int

    kind = "injector"  # its streams are sources, not outputs: it writes before the pipeline

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

    def grants(self, graph: Graph, *, reset: bool = False) -> list[Grant]:
        """Write on its streams and its own watermark channel (which it may create), its
        transactional ids; nothing else."""
        return [
            *literal({*self.streams, self.watermarks}, WRITE_OPERATIONS),
            Grant("TOPIC", "LITERAL", self.watermarks, ("CREATE",)),
            Grant("TRANSACTIONAL_ID", "PREFIXED", self.transactional_prefix,
                  TRANSACTION_OPERATIONS),
        ]  # fmt: skip
