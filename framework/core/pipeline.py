"""Declaring a pipeline: named streams, sources and the parts that read and write them
(computations, windows, joins, sinks; injectors through their sources), each checked once as
it is declared."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from framework.core.api import Computation
from framework.core.computation_spec import ComputationSpec, computation_spec
from framework.core.declarations import (
    DEFAULT_HOOK_TIMEOUT_MS,
    DEFAULT_PARTITIONS,
    EMITS,
    ERROR_POLICIES,
    FORMATS,
    GUARANTEES,
    LATE_POLICIES,
    NAME,
    STREAM,
    BoundedOutOfOrderness,
    InjectorWatermark,
    Input,
    KeyExtractor,
    Percentile,
    PipelineError,
    Source,
    WatermarkPolicy,
    check_format,
    check_name,
    check_outside,
    check_schema,
    check_stream,
    check_subject_strategy,
    check_topic_length,
    check_writable,
    key_by,
)
from framework.core.dedup import Dedup
from framework.core.global_tables import GlobalTable
from framework.core.joins.declaration import join_spec
from framework.core.part import Part
from framework.core.pipeline_graph import PipelineGraph
from framework.core.query_spec import QUERIES
from framework.core.sink_spec import sink_spec
from framework.core.windows.aggregates import Aggregate
from framework.core.windows.declaration import windowed_spec
from framework.core.windows.shapes import Window

__all__ = [
    "DEFAULT_PARTITIONS",
    "EMITS",
    "ERROR_POLICIES",
    "FORMATS",
    "GUARANTEES",
    "LATE_POLICIES",
    "NAME",
    "STREAM",
    "BoundedOutOfOrderness",
    "ComputationSpec",
    "Dedup",
    "GlobalTable",
    "InjectorWatermark",
    "Input",
    "KeyExtractor",
    "Part",
    "Percentile",
    "Pipeline",
    "PipelineError",
    "Source",
    "WatermarkPolicy",
    "key_by",
]


@dataclass
class Pipeline(PipelineGraph):
    """A named graph of streams and the parts that read and write them; every edge is a Kafka
    topic."""

    name: str
    partitions: int = DEFAULT_PARTITIONS
    registry: str | None = None
    """A Schema Registry's URL: every stream that names no format is then in the Confluent
    wire format, with or without a schema (a source without one is read as its writers wrote
    it); format="avro" keeps single-object encoding, format="json" JSON (the runtime falls back
    to `[registry] url` in --config, then LOGWHEEL_SCHEMA_REGISTRY)."""
    sources: dict[str, Source] = field(default_factory=dict)
    subject_strategy: str | None = None
    """Under which subject writers register their schemas in the registry: "topic"
    (`<topic>-value`, the default), "record" (the record's full name) or "topic_record"
    (`<topic>-<record full name>`): Confluent's TopicNameStrategy, RecordNameStrategy and
    TopicRecordNameStrategy. None: `[registry] subject_name_strategy`, else "topic"."""
    _declared: dict[str, Part] = field(default_factory=dict, init=False, repr=False)
    """The parts declared by name, in declaration order (injectors come from the sources)."""

    def __post_init__(self) -> None:
        check_name("pipeline", self.name)
        check_topic_length(f"{self.name}.c.changelog", f"pipeline {self.name[:40]!r}...'s")
        if self.partitions < 1:
            raise PipelineError(f"pipeline {self.name!r}: partitions must be >= 1")
        check_subject_strategy(f"pipeline {self.name!r}", self.subject_strategy)

    # -- declaring -----------------------------------------------------------------------

    def source(
        self,
        stream: str,
        schema: str | None = None,
        watermark: WatermarkPolicy | None = None,
        format: str | None = None,  # noqa: A002 - the contract's keyword
    ) -> Pipeline:
        """Declare a stream written from outside the pipeline. `format="confluent"` (the
        default once the pipeline has a registry) reads it in the Confluent wire format
        (resolved to `schema`, or as its writers wrote it without one); `format="json"` reads
        JSON, registry or not. With `watermark=InjectorWatermark(name)`, the injector `name`
        writing it is a part of the pipeline."""
        check_stream(stream)
        check_outside(stream, self.internal_prefixes())
        if stream in self.sources:
            raise PipelineError(f"source {stream!r} is declared twice")
        if schema is not None:
            check_schema(schema)
        check_format(f"source {stream!r}", format, schema)
        if isinstance(watermark, InjectorWatermark):
            injector = watermark.injector
            if injector in self._declared or injector == QUERIES:
                raise PipelineError(
                    f"injector {injector!r}: {self._taken(injector)}: name the injector otherwise"
                )
            self._claim_prefix(f"injector {injector!r}", injector)
            check_outside(stream, {f"injector {injector!r}": f"{self.name}.{injector}."})
            check_writable(stream, f"injector {injector!r}: stream")
        self.sources[stream] = Source(stream, schema, watermark, format)
        return self

    def computation(
        self,
        name: str,
        computation: type[Computation] | Callable[[], Computation],
        *,
        inputs: Mapping[str, KeyExtractor | None],
        outputs: Mapping[str, str | None] | None = None,
        guarantee: str = "exactly_once",
        partitions: int | None = None,
        state_schema: str | None = None,
        on_error: str = "dead_letter",
        tables: Mapping[str, str] | None = None,
        formats: Mapping[str, str] | None = None,
        low_watermark: Percentile | None = None,
        dedup: Dedup | None = None,
        hook_timeout_ms: int = DEFAULT_HOOK_TIMEOUT_MS,
        global_tables: Mapping[str, str | GlobalTable] | None = None,
    ) -> Pipeline:
        """Declare a computation reading `inputs` (stream -> key extractor or None).

        `computation` is a Computation class or any factory returning one; the state schema is
        `state_schema`, else the class's `state_schema` attribute. `on_error` says what a bad
        record becomes: "dead_letter" (its dead-letter topic), "skip" (counted) or "stop".
        `tables` names compacted topics (name -> topic, e.g. another computation's changelog)
        the hooks read with `ctx.table(name)`, co-partitioned with the key space. `formats`
        says how outputs are written (stream -> "confluent" or "avro" with a schema, "json"
        without one, for a pipeline with a registry).
        `low_watermark=Percentile(f)` fires timers on the time that upstream partitions holding
        a fraction f of the recent input have passed (default: the strict minimum).
        `dedup=Dedup(...)` drops records whose id was already seen for the same key.
        A hook call (or key extractor) running longer than `hook_timeout_ms` is abandoned and
        its record dead-lettered at stage "timeout".
        `global_tables` names topics every task reads whole (name -> topic, or
        `GlobalTable(topic, history_ms=...)` to look values up as of a time) with
        `ctx.table(name)`: no co-partitioning needed."""
        return self._add(
            computation_spec(
                self.name,
                name,
                computation,
                inputs=inputs,
                outputs=outputs,
                guarantee=guarantee,
                partitions=partitions or self.partitions,
                state_schema=state_schema,
                on_error=on_error,
                tables=tables,
                formats=formats,
                low_watermark=low_watermark,
                dedup=dedup,
                hook_timeout_ms=hook_timeout_ms,
                global_tables=global_tables,
            )
        )

    def windowed(
        self,
        name: str,
        *,
        inputs: Mapping[str, KeyExtractor | None],
        window: Window,
        aggregate: Aggregate,
        output: str,
        output_schema: str | None = None,
        output_format: str | None = None,
        emit: str = "final",
        guarantee: str = "exactly_once",
        on_late: str = "drop",
        on_error: str = "dead_letter",
        partitions: int | None = None,
        low_watermark: Percentile | None = None,
        dedup: Dedup | None = None,
        hook_timeout_ms: int = DEFAULT_HOOK_TIMEOUT_MS,
        global_tables: Mapping[str, str | GlobalTable] | None = None,
    ) -> Pipeline:
        """Declare a windowed aggregation: per key of `inputs`, the records of each `window`
        (`windows.Tumbling`, `Hopping` or `Session`) folded by `aggregate`, produced on `output`
        as `{"key", "start", "end", "value"}` with timestamp `end - 1` — once, when the input
        low watermark reaches `end + grace_ms` (`emit="final"`), or on every change
        (`emit="update"`). A record whose windows have all closed is late: dropped and counted
        (`on_late="drop"`) or dead-lettered at stage "late" (`on_late="dead_letter"`).
        `low_watermark=Percentile(f)` closes windows on a percentile low watermark.
        `dedup=Dedup(...)` drops records whose id was already seen for the same key.
        `hook_timeout_ms` bounds each call of the aggregate's and key extractors' code, as
        for `computation`. `global_tables` are declared and read as for `computation`."""
        return self._add(
            windowed_spec(
                self.name,
                name,
                inputs=inputs,
                window=window,
                aggregate=aggregate,
                output=output,
                output_schema=output_schema,
                output_format=output_format,
                emit=emit,
                guarantee=guarantee,
                on_late=on_late,
                on_error=on_error,
                partitions=partitions or self.partitions,
                low_watermark=low_watermark,
                dedup=dedup,
                hook_timeout_ms=hook_timeout_ms,
                global_tables=global_tables,
            )
        )

    def join(
        self,
        name: str,
        *,
        left: str,
        right: str,
        inputs: Mapping[str, KeyExtractor | None],
        before_ms: int,
        after_ms: int,
        grace_ms: int = 0,
        how: str = "inner",
        output: str,
        output_schema: str | None = None,
        output_format: str | None = None,
        guarantee: str = "exactly_once",
        on_late: str = "drop",
        on_error: str = "dead_letter",
        partitions: int | None = None,
        low_watermark: Percentile | None = None,
        dedup: Dedup | None = None,
        hook_timeout_ms: int = DEFAULT_HOOK_TIMEOUT_MS,
        global_tables: Mapping[str, str | GlobalTable] | None = None,
    ) -> Pipeline:
        """Declare an interval join of streams `left` and `right`, both keyed by `inputs`
        (stream -> key extractor, or None for the Kafka key): per key, a right record at t_r
        meets a left one at t_l when t_l - before_ms <= t_r <= t_l + after_ms, and each pair
        is produced once on `output` as {"key", "left", "right"} at max(t_l, t_r). With
        how="left" (or "outer"), a left (or either) record no partner matched is produced
        alone once the input low watermark passes its window's far edge plus `grace_ms`. A
        record whose own window closed before it came is late: dropped and counted
        (`on_late="drop"`) or dead-lettered at stage "late". The other options are
        `computation`'s."""
        return self._add(
            join_spec(
                self.name,
                name,
                left=left,
                right=right,
                inputs=inputs,
                before_ms=before_ms,
                after_ms=after_ms,
                grace_ms=grace_ms,
                how=how,
                output=output,
                output_schema=output_schema,
                output_format=output_format,
                guarantee=guarantee,
                on_late=on_late,
                on_error=on_error,
                partitions=partitions or self.partitions,
                low_watermark=low_watermark,
                dedup=dedup,
                hook_timeout_ms=hook_timeout_ms,
                global_tables=global_tables,
            )
        )

    def sink(self, name: str, *, inputs: Mapping[str, None], sink: object) -> Pipeline:
        """Declare a sink: the records of `inputs` (stream -> None: read as partitioned)
        written by `sink` (a `framework.sinks.Sink`, e.g. `PostgresSink`) exactly once, each
        batch of a partition in one transaction of the target with the partition's next
        offset. It runs under `logwheel run` as its own consumer group `<pipeline>.<name>`,
        its refused rows in `<pipeline>.<name>.dlq`."""
        return self._add(sink_spec(self.name, name, inputs, sink))

    def _add(self, part: Part) -> Pipeline:
        """Add a part once it fits the graph: its name free, the streams it reads and writes
        outside every part's own topics, and no stream declared inside its own."""
        where = f"{part.kind} {part.name!r}"
        if part.name in self._declared or part.name in self._injectors() or part.name == QUERIES:
            raise PipelineError(f"{where}: {self._taken(part.name)}: give it another name")
        prefixes = {**self.internal_prefixes(), where: f"{self.name}.{part.name}."}
        for stream in [*(i.stream for i in part.inputs), *part.outputs]:
            check_outside(stream, prefixes)
        for stream in part.outputs:
            check_writable(stream, f"{where}: output")
        self._claim_prefix(where, part.name)
        self._declared[part.name] = part
        return self

    def _taken(self, name: str) -> str:
        if name == QUERIES:
            return f"{QUERIES!r} names the queries of the pipeline's state (`logwheel acls`)"
        if name in self._declared:
            return f"a {self._declared[name].kind} named {name!r} is declared already"
        return f"an injector named {name!r} writes sources of the pipeline"

    def _claim_prefix(self, owner: str, name: str) -> None:
        """Refuse `owner`'s prefix if a stream already declared lies inside it."""
        check_topic_length(f"{self.name}.{name}.watermarks", owner)
        for stream in self.streams():
            check_outside(stream, {owner: f"{self.name}.{name}."})
