"""Declaring a pipeline: named streams, sources, computations and the topics they imply."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from framework.core.api import Computation
from framework.core.computation_spec import DEFAULT_HOOK_TIMEOUT_MS, ComputationSpec
from framework.core.declarations import (
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
from framework.core.global_tables import GlobalTable, declare_global_tables
from framework.core.joins.declaration import declare_join
from framework.core.sink_spec import SinkSpec, sink_spec
from framework.core.windows import Aggregate, Hopping, Session, Window
from framework.core.windows.operator import Windowed

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
    "Percentile",
    "Pipeline",
    "PipelineError",
    "Source",
    "WatermarkPolicy",
    "key_by",
]


@dataclass
class Pipeline:
    """A named graph of streams and computations; every edge is a Kafka topic."""

    name: str
    partitions: int = DEFAULT_PARTITIONS
    registry: str | None = None
    """A Schema Registry's URL: every stream that names no format is then in the Confluent
    wire format, with or without a schema (a source without one is read as its writers wrote
    it); format="avro" keeps single-object encoding, format="json" JSON (the runtime falls back
    to `[registry] url` in --config, then LOGWHEEL_SCHEMA_REGISTRY)."""
    sources: dict[str, Source] = field(default_factory=dict)
    computations: dict[str, ComputationSpec] = field(default_factory=dict)
    sinks: dict[str, SinkSpec] = field(default_factory=dict)
    subject_strategy: str | None = None
    """Under which subject writers register their schemas in the registry: "topic"
    (`<topic>-value`, the default), "record" (the record's full name) or "topic_record"
    (`<topic>-<record full name>`): Confluent's TopicNameStrategy, RecordNameStrategy and
    TopicRecordNameStrategy. None: `[registry] subject_name_strategy`, else "topic"."""

    def __post_init__(self) -> None:
        check_name("pipeline", self.name)
        check_topic_length(f"{self.name}.c.changelog", f"pipeline {self.name[:40]!r}...'s")
        if self.partitions < 1:
            raise PipelineError(f"pipeline {self.name!r}: partitions must be >= 1")
        check_subject_strategy(f"pipeline {self.name!r}", self.subject_strategy)

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
        JSON, registry or not."""
        check_stream(stream)
        check_outside(stream, self.internal_prefixes())
        if stream in self.sources:
            raise PipelineError(f"source {stream!r} is declared twice")
        if schema is not None:
            check_schema(schema)
        check_format(f"source {stream!r}", format, schema)
        if isinstance(watermark, InjectorWatermark):
            self._claim_prefix(f"injector {watermark.injector!r}", watermark.injector)
            check_writable(stream, f"injector {watermark.injector!r}: stream")
        self.sources[stream] = Source(stream, schema, watermark, format)
        return self

    def internal_prefixes(self) -> dict[str, str]:
        """Each computation's and injector's internal topic prefix, `<pipeline>.<name>.`."""
        owners = {f"computation {c!r}": c for c in self.computations}
        owners.update({f"sink {s!r}": s for s in self.sinks})
        for s in self.sources.values():
            if isinstance(s.watermark, InjectorWatermark):
                owners[f"injector {s.watermark.injector!r}"] = s.watermark.injector
        return {owner: f"{self.name}.{name}." for owner, name in owners.items()}

    def _claim_prefix(self, owner: str, name: str) -> None:
        """Refuse `owner`'s prefix if a stream already declared lies inside it."""
        check_topic_length(f"{self.name}.{name}.watermarks", owner)
        for stream in self.streams():
            check_outside(stream, {owner: f"{self.name}.{name}."})

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
        check_name("computation", name)
        if name in self.computations or name in self.sinks:
            raise PipelineError(f"computation {name!r} is declared twice")
        if guarantee not in GUARANTEES:
            raise PipelineError(
                f"computation {name!r}: guarantee={guarantee!r}; use one of {GUARANTEES}"
            )
        if not inputs:
            raise PipelineError(f"computation {name!r} needs at least one input stream")
        if on_error not in ERROR_POLICIES:
            raise PipelineError(
                f"computation {name!r}: on_error={on_error!r}; use one of {ERROR_POLICIES}"
            )
        outputs = dict(outputs or {})
        tables = dict(tables or {})
        global_tables = declare_global_tables(f"computation {name!r}", global_tables, tables)
        for stream in [*inputs, *outputs, *tables.values()]:
            check_stream(stream)
        prefixes = {**self.internal_prefixes(), f"computation {name!r}": f"{self.name}.{name}."}
        for stream in [*inputs, *outputs]:
            check_outside(stream, prefixes)
        for stream in outputs:
            check_writable(stream, f"computation {name!r}: output")
        self._claim_prefix(f"computation {name!r}", name)
        for topic in [
            f"{self.name}.{name}.changelog",
            *(f"{self.name}.{name}.{s}.by-key" for s in inputs),
        ]:
            check_topic_length(topic, f"computation {name!r}'s")
        for table in tables:
            check_name(f"computation {name!r}: table", table)
        for schema in [*outputs.values(), state_schema]:
            if schema is not None:
                check_schema(schema)
        formats = dict(formats or {})
        for stream, fmt in formats.items():
            if stream not in outputs:
                raise PipelineError(
                    f"computation {name!r}: formats names {stream!r}, which is not one of its "
                    f"outputs {sorted(outputs)}"
                )
            check_format(f"computation {name!r}: output {stream!r}", fmt, outputs[stream])
            if outputs[stream] is None and fmt != "json":
                raise PipelineError(
                    f"computation {name!r}: output {stream!r} is format={fmt!r} but has no "
                    "schema: give it one (outputs={stream: 'full.Name'})"
                )
        if low_watermark is not None and not isinstance(low_watermark, Percentile):
            raise PipelineError(
                f"computation {name!r}: low_watermark={low_watermark!r}; use Percentile(0.99) "
                "or leave it out for the strict minimum"
            )
        if dedup is not None and not isinstance(dedup, Dedup):
            raise PipelineError(
                f"computation {name!r}: dedup={dedup!r}; use dedup=Dedup(id=..., horizon_ms=...)"
            )
        if type(hook_timeout_ms) is not int or hook_timeout_ms <= 0:
            raise PipelineError(
                f"computation {name!r}: hook_timeout_ms={hook_timeout_ms!r}; give whole "
                f"milliseconds > 0 (default {DEFAULT_HOOK_TIMEOUT_MS:_})"
            )
        for stream, extractor in inputs.items():
            if extractor is not None and not callable(extractor):
                raise PipelineError(
                    f"computation {name!r}: input {stream!r} needs key_by(field), "
                    "a callable record -> str, or None"
                )
        self.computations[name] = ComputationSpec(
            pipeline=self.name,
            name=name,
            factory=computation,
            inputs=tuple(Input(s, k) for s, k in inputs.items()),
            outputs=outputs,
            guarantee=guarantee,
            partitions=partitions or self.partitions,
            state_schema=state_schema or getattr(computation, "state_schema", None),
            on_error=on_error,
            tables=tables,
            formats=formats,
            low_watermark=low_watermark,
            dedup=dedup,
            hook_timeout_ms=hook_timeout_ms,
            global_tables=global_tables,
        )
        return self

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
        where = f"windowed computation {name!r}"
        if not isinstance(window, Hopping | Session):
            raise PipelineError(
                f"{where}: window={window!r}; use windows.Tumbling(size_ms), "
                "windows.Hopping(size_ms, every_ms) or windows.Session(gap_ms)"
            )
        if not isinstance(aggregate, Aggregate):
            raise PipelineError(
                f"{where}: aggregate={aggregate!r}; use windows.Count(), Sum(field), Min(field), "
                "Max(field), Mean(field), Collect(field) or Reduce(initial, add, merge)"
            )
        if isinstance(window, Session) and not aggregate.mergeable:
            raise PipelineError(
                f"{where}: session windows merge, and {aggregate!r} cannot: give "
                "Reduce(initial, add, merge=...) a merge(a, b) of two accumulators"
            )
        if emit not in EMITS:
            raise PipelineError(f"{where}: emit={emit!r}; use one of {EMITS}")
        if on_late not in LATE_POLICIES:
            raise PipelineError(f"{where}: on_late={on_late!r}; use one of {LATE_POLICIES}")
        self.computation(
            name,
            lambda: Windowed(window, aggregate, output, emit),
            inputs=inputs,
            outputs={output: output_schema},
            guarantee=guarantee,
            partitions=partitions,
            on_error=on_error,
            formats={output: output_format} if output_format else None,
            low_watermark=low_watermark,
            dedup=dedup,
            hook_timeout_ms=hook_timeout_ms,
            global_tables=global_tables,
        )
        self.computations[name] = replace(
            self.computations[name], on_late=on_late, hold_ms=window.grace_ms, kind="window"
        )
        return self

    def sink(self, name: str, *, inputs: Mapping[str, None], sink: object) -> Pipeline:
        """Declare a sink: the records of `inputs` (stream -> None: read as partitioned)
        written by `sink` (a `framework.sinks.Sink`, e.g. `PostgresSink`) exactly once, each
        batch of a partition in one transaction of the target with the partition's next
        offset. It runs under `logwheel run` as its own consumer group `<pipeline>.<name>`,
        its refused rows in `<pipeline>.<name>.dlq`."""
        if name in self.sinks or name in self.computations:
            raise PipelineError(f"sink {name!r}: a computation or sink of that name exists")
        spec = sink_spec(self.name, name, inputs, sink)
        for stream in spec.inputs:
            check_outside(stream, self.internal_prefixes())
        self._claim_prefix(f"sink {name!r}", name)
        self.sinks[name] = spec
        return self

    def join(self, name: str, **declaration: Any) -> Pipeline:
        """Declare an interval join of two streams (CONTRACT.md, "Joins between streams"):
        `left=`, `right=`, `inputs=`, `before_ms=`, `after_ms=`, `grace_ms=0`, `how="inner"`
        (or "left", "outer"), `output=`, `output_schema=None`, `on_late="drop"`, and
        `computation`'s own options; framework/core/joins/declaration.py has the rest."""
        declare_join(self, name, **declaration)
        return self

    # -- the graph -----------------------------------------------------------------------

    def writers(self, stream: str) -> list[ComputationSpec]:
        """Computations that declare `stream` as an output."""
        return [c for c in self.computations.values() if stream in c.outputs]

    def schema_of(self, stream: str) -> str | None:
        """The schema full name of a stream's values, None for JSON."""
        if stream in self.sources:
            return self.sources[stream].schema
        for writer in self.writers(stream):
            if writer.outputs[stream] is not None:
                return writer.outputs[stream]
        return None

    def declared_format(self, stream: str) -> str | None:
        """The format a stream is declared with, if any (its source's, else a writer's)."""
        if stream in self.sources:
            return self.sources[stream].format
        for writer in self.writers(stream):
            if stream in writer.formats:
                return writer.formats[stream]
        return None

    def format_of(self, stream: str, registry: str | None) -> str:
        """How a stream's values are encoded: "json", "avro" or "confluent". `registry` is
        the registry the pipeline runs against (its own, else the run's): with one, a stream
        that names no format is in the wire format, with or without a schema; without one,
        a stream is Avro single-object with a schema, JSON without."""
        declared = self.declared_format(stream)
        if declared is not None:
            return declared
        if registry:
            return "confluent"
        return "json" if self.schema_of(stream) is None else "avro"

    def streams(self) -> list[str]:
        names: dict[str, None] = dict.fromkeys(self.sources)
        for c in self.computations.values():
            names.update(dict.fromkeys(i.stream for i in c.inputs))
            names.update(dict.fromkeys(c.outputs))
        for sink in self.sinks.values():
            names.update(dict.fromkeys(sink.inputs))
        return list(names)

    def validate(self) -> None:
        """Fail with one line naming the fix if the graph cannot run."""
        for c in self.computations.values():
            for i in c.inputs:
                if i.stream not in self.sources and not self.writers(i.stream):
                    raise PipelineError(
                        f"computation {c.name!r} reads {i.stream!r}, which no computation "
                        f"writes: declare it with pipeline.source({i.stream!r}, ...)"
                    )
        for sink in self.sinks.values():
            for stream in sink.inputs:
                if stream not in self.sources and not self.writers(stream):
                    raise PipelineError(
                        f"sink {sink.name!r} reads {stream!r}, which no computation writes: "
                        f"declare it with pipeline.source({stream!r}, ...)"
                    )
        for stream in self.streams():
            schemas = {w.outputs[stream] for w in self.writers(stream)}
            if stream in self.sources:
                schemas.add(self.sources[stream].schema)
            if len(schemas) > 1:
                raise PipelineError(
                    f"stream {stream!r} is declared with different schemas "
                    f"{sorted(map(str, schemas))}: give every writer the same one"
                )
            formats = {w.formats.get(stream) for w in self.writers(stream)}
            if stream in self.sources:
                formats.add(self.sources[stream].format)
            if len(formats) > 1:
                raise PipelineError(
                    f"stream {stream!r} is declared with different formats "
                    f"{sorted(map(str, formats))}: give every writer the same one"
                )

    def __getitem__(self, name: str) -> ComputationSpec:
        try:
            return self.computations[name]
        except KeyError:
            raise PipelineError(
                f"pipeline {self.name!r} has no computation {name!r}; "
                f"it has {sorted(self.computations)}"
            ) from None
