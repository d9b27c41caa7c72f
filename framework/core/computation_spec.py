"""What a pipeline declares of one computation (a window and a join are computations too): its
spec, checked and built once by `computation_spec`, and the topics, grants and graph node that
follow from it as a part of the pipeline (framework/core/part.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from framework.core.api import MIN_TIME, Computation
from framework.core.declarations import (
    DEFAULT_HOOK_TIMEOUT_MS,
    ERROR_POLICIES,
    GUARANTEES,
    LATE_POLICIES,
    Input,
    KeyExtractor,
    Percentile,
    PipelineError,
    check_format,
    check_name,
    check_schema,
    check_stream,
    check_topic_length,
)
from framework.core.dedup import Dedup
from framework.core.global_tables import GlobalTable, declare_global_tables
from framework.core.part import (
    GROUP_OPERATIONS,
    OWN_TOPIC_OPERATIONS,
    READ_OPERATIONS,
    RESET_OPERATIONS,
    TRANSACTION_OPERATIONS,
    WRITE_OPERATIONS,
    Grant,
    Graph,
    OwnTopic,
    literal,
)


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
    "computation", "window" (`windowed`), "join" (`join`)."""
    global_tables: Mapping[str, GlobalTable] = field(default_factory=dict)
    """Topics every task reads whole, by name (framework/core/global_tables.py)."""

    runtime = "keyed"
    replayable = True
    queryable = True

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
    def subscribed_topics(self) -> list[str]:
        """What its group subscribes to: what it consumes and its replayed dead letters."""
        return [*self.consumed_topics, self.replay]

    @property
    def table_topics(self) -> list[str]:
        """The topics of every table it reads: co-partitioned, then global."""
        return [*self.tables.values(), *(t.topic for t in self.global_tables.values())]

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "exactly_once"

    @property
    def node(self) -> str:
        return f"c:{self.name}"

    @property
    def detail(self) -> str:
        return f"grace {self.hold_ms} ms" if self.kind == "window" and self.hold_ms else ""

    def output_watermark(self, input_watermark: int, earliest_timer: int | None) -> int:
        """The watermark of this computation's future output: min(input watermark, earliest
        pending event-time timer), less `hold_ms` (invariant 4)."""
        low = input_watermark if earliest_timer is None else min(input_watermark, earliest_timer)
        return max(MIN_TIME, low - self.hold_ms) if self.hold_ms else low

    def own_topics(self) -> list[OwnTopic]:
        n = self.partitions
        own = [
            OwnTopic(self.changelog, "changelog", n, "compact", True),
            OwnTopic(self.timers, "timers", n, "compact", True),
        ]
        if self.dedup is not None:
            own.append(OwnTopic(self.ids, "ids", n, "compact", True))
        own.append(OwnTopic(self.watermarks, "watermarks", 1, "compact", True))
        own += [
            OwnTopic(self.by_key(i.stream), "by-key", n, "delete", True)
            for i in self.inputs
            if i.key is not None
        ]
        return [
            *own,
            OwnTopic(self.dlq, "dlq", 1, "dlq", False),
            OwnTopic(self.replay, "replay", n, "replay", True),
            OwnTopic(self.replayed, "replayed", 1, "compact", False),
        ]

    def tables_read(self) -> list[tuple[str, str, str]]:
        found = [(name, topic, "table") for name, topic in self.tables.items()]
        found += [(name, t.topic, "global table") for name, t in self.global_tables.items()]
        return found

    def channels_followed(self, graph: Graph) -> list[str]:
        """Every watermark channel its tasks learn their inputs' watermarks from."""
        return [c for i in self.inputs for c in graph.channels_of(i.stream)]

    def grants(self, graph: Graph, *, reset: bool = False) -> list[Grant]:
        """Everything under `<pipeline>.<computation>.` (its state, marks, repartition topics,
        dead letters, transactional ids, reader group), its group; Read on its inputs, tables
        and the channels of what writes them; Write on its outputs."""
        prefix = f"{self.group}."
        own = OWN_TOPIC_OPERATIONS + (RESET_OPERATIONS if reset else ())
        reads = {i.stream for i in self.inputs} | set(self.table_topics)
        reads |= set(self.channels_followed(graph)) - {self.watermarks}
        return [
            Grant("TOPIC", "PREFIXED", prefix, own),
            Grant("GROUP", "LITERAL", self.group, GROUP_OPERATIONS),
            Grant("GROUP", "PREFIXED", prefix, GROUP_OPERATIONS),
            Grant("TRANSACTIONAL_ID", "PREFIXED", prefix, TRANSACTION_OPERATIONS),
            *literal(reads, READ_OPERATIONS),
            *literal(set(self.outputs), WRITE_OPERATIONS),
        ]


def computation_spec(
    pipeline: str,
    name: str,
    factory: type[Computation] | Callable[[], Computation],
    *,
    inputs: Mapping[str, KeyExtractor | None],
    outputs: Mapping[str, str | None] | None,
    guarantee: str,
    partitions: int,
    state_schema: str | None,
    on_error: str,
    tables: Mapping[str, str] | None,
    formats: Mapping[str, str] | None,
    low_watermark: Percentile | None,
    dedup: Dedup | None,
    hook_timeout_ms: int,
    global_tables: Mapping[str, str | GlobalTable] | None,
    kind: str = "computation",
    on_late: str = "drop",
    hold_ms: int = 0,
    where: str | None = None,
) -> ComputationSpec:
    """A checked `ComputationSpec`, built once; a one-line `PipelineError` naming the fix
    otherwise. `where` names the declaration in messages ("computation 'c'", "join 'j'")."""
    where = where or f"computation {name!r}"
    check_name("computation", name)
    if guarantee not in GUARANTEES:
        raise PipelineError(f"{where}: guarantee={guarantee!r}; use one of {GUARANTEES}")
    if not inputs:
        raise PipelineError(f"{where} needs at least one input stream")
    if on_error not in ERROR_POLICIES:
        raise PipelineError(f"{where}: on_error={on_error!r}; use one of {ERROR_POLICIES}")
    if on_late not in LATE_POLICIES:
        raise PipelineError(f"{where}: on_late={on_late!r}; use one of {LATE_POLICIES}")
    outputs = dict(outputs or {})
    tables = dict(tables or {})
    declared_globals = declare_global_tables(where, global_tables, tables)
    for stream in [*inputs, *outputs, *tables.values()]:
        check_stream(stream)
    group = f"{pipeline}.{name}"
    for topic in [f"{group}.changelog", *(f"{group}.{s}.by-key" for s in inputs)]:
        check_topic_length(topic, f"{where}'s")
    for table in tables:
        check_name(f"{where}: table", table)
    for schema in [*outputs.values(), state_schema]:
        if schema is not None:
            check_schema(schema)
    formats = {s: f for s, f in (formats or {}).items() if f is not None}
    for stream, fmt in formats.items():
        if stream not in outputs:
            raise PipelineError(
                f"{where}: formats names {stream!r}, which is not one of its outputs "
                f"{sorted(outputs)}"
            )
        check_format(f"{where}: output {stream!r}", fmt, outputs[stream])
        if outputs[stream] is None and fmt != "json":
            raise PipelineError(
                f"{where}: output {stream!r} is format={fmt!r} but has no schema: give it one "
                "(outputs={stream: 'full.Name'})"
            )
    if low_watermark is not None and not isinstance(low_watermark, Percentile):
        raise PipelineError(
            f"{where}: low_watermark={low_watermark!r}; use Percentile(0.99) or leave it out "
            "for the strict minimum"
        )
    if dedup is not None and not isinstance(dedup, Dedup):
        raise PipelineError(f"{where}: dedup={dedup!r}; use dedup=Dedup(id=..., horizon_ms=...)")
    if type(hook_timeout_ms) is not int or hook_timeout_ms <= 0:
        raise PipelineError(
            f"{where}: hook_timeout_ms={hook_timeout_ms!r}; give whole milliseconds > 0 "
            f"(default {DEFAULT_HOOK_TIMEOUT_MS:_})"
        )
    for stream, extractor in inputs.items():
        if extractor is not None and not callable(extractor):
            raise PipelineError(
                f"{where}: input {stream!r} needs key_by(field), a callable record -> str, or None"
            )
    return ComputationSpec(
        pipeline=pipeline,
        name=name,
        factory=factory,
        inputs=tuple(Input(s, k) for s, k in inputs.items()),
        outputs=outputs,
        guarantee=guarantee,
        partitions=partitions,
        state_schema=state_schema or getattr(factory, "state_schema", None),
        on_error=on_error,
        tables=tables,
        on_late=on_late,
        formats=formats,
        hold_ms=hold_ms,
        low_watermark=low_watermark,
        dedup=dedup,
        hook_timeout_ms=hook_timeout_ms,
        kind=kind,
        global_tables=declared_globals,
    )
