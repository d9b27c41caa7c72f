"""What a pipeline declares of one computation, and the topics that follow from its name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from framework.core.api import MIN_TIME, Computation
from framework.core.declarations import Input, Percentile
from framework.core.dedup import Dedup
from framework.core.global_tables import GlobalTable

DEFAULT_HOOK_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class ComputationSpec:
    pipeline: str
    name: str
    factory: Callable[[], Computation]
    inputs: tuple[Input, ...]
    outputs: Mapping[str, str | None]
    guarantee: str
    partitions: int
    state_schema: str | None = None
    on_error: str = "dead_letter"
    tables: Mapping[str, str] = field(default_factory=dict)  # name -> compacted topic
    on_late: str = "drop"
    formats: Mapping[str, str] = field(default_factory=dict)  # output stream -> format
    hold_ms: int = 0
    """How far below min(input watermark, earliest pending event-time timer) the output
    watermark stays: a window's result, produced by its timer at `end + grace`, carries the
    timestamp `end - 1`; a hold of `grace_ms` keeps every result on time downstream."""
    low_watermark: Percentile | None = None
    """What the timers, windows and lateness follow: None, the strict input low watermark (the
    minimum over every upstream partition); a `Percentile`, the time that partitions holding
    that fraction of the recent input have passed. What is published stays strict."""
    dedup: Dedup | None = None
    hook_timeout_ms: int = DEFAULT_HOOK_TIMEOUT_MS
    """How long one hook call may run before it is abandoned and its record dead-lettered at
    stage "timeout" (framework/streaming/watchdog.py)."""
    kind: str = "computation"
    """What declared it, for pictures of the graph (`logwheel graph`, `logwheel ui`):
    "computation", "window" (`windowed`), ..."""
    global_tables: Mapping[str, GlobalTable] = field(default_factory=dict)
    """Topics every task reads whole, by name (framework/core/global_tables.py)."""

    @property
    def group(self) -> str:
        return f"{self.pipeline}.{self.name}"

    @property
    def changelog(self) -> str:
        return f"{self.group}.changelog"

    @property
    def timers(self) -> str:
        return f"{self.group}.timers"

    @property
    def ids(self) -> str:
        """The compacted journal of the record ids a deduplicating computation has seen."""
        return f"{self.group}.ids"

    @property
    def journals(self) -> dict[str, str]:
        """The compacted journals a task's store is restored from: name -> topic."""
        named = {"changelog": self.changelog, "timers": self.timers}
        if self.dedup is not None:
            named["ids"] = self.ids
        return named

    @property
    def watermarks(self) -> str:
        return f"{self.group}.watermarks"

    @property
    def dlq(self) -> str:
        return f"{self.group}.dlq"

    @property
    def replay(self) -> str:
        """Dead letters sent back by `logwheel dlq replay`: partition p is read by keyed task p
        beside its inputs (framework/ops/replay.py)."""
        return f"{self.group}.replay"

    @property
    def replayed(self) -> str:
        """The compacted record of which dead letters `logwheel dlq replay` has sent back."""
        return f"{self.group}.replayed"

    def by_key(self, stream: str) -> str:
        return f"{self.group}.{stream}.by-key"

    @property
    def keyed_topics(self) -> list[str]:
        """Topics whose partition p belongs to keyed task p: the `.by-key` topic of each
        re-keyed input, the stream itself for an input kept by its Kafka key."""
        return [self.by_key(i.stream) if i.key else i.stream for i in self.inputs]

    @property
    def consumed_topics(self) -> list[str]:
        """Everything the computation's consumer group reads: its keyed topics and the
        streams it re-keys."""
        return self.keyed_topics + [i.stream for i in self.inputs if i.key]

    @property
    def table_topics(self) -> list[str]:
        """The topics of every table it reads: co-partitioned, then global."""
        return [*self.tables.values(), *(t.topic for t in self.global_tables.values())]

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "exactly_once"

    def output_watermark(self, input_watermark: int, earliest_timer: int | None) -> int:
        """The watermark of this computation's future output: min(input watermark, earliest
        pending event-time timer), less `hold_ms` (invariant 4)."""
        low = input_watermark if earliest_timer is None else min(input_watermark, earliest_timer)
        return max(MIN_TIME, low - self.hold_ms) if self.hold_ms else low
