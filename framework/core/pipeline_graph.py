"""What a declared pipeline is, as a graph: its parts (`parts()`, `part(name)`, the computations
among them), which part writes which stream and the watermark channels a reader follows, each
stream's schema and format, and the checks that the whole can run (`validate`). `Pipeline`
(framework/core/pipeline.py) declares; this reads what was declared."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Self

from framework.core.computation_spec import ComputationSpec
from framework.core.declarations import InjectorWatermark, PipelineError, Source
from framework.core.injector_spec import InjectorSpec
from framework.core.part import Part
from framework.core.query_spec import QueriesSpec


class PipelineGraph:
    """The graph of a pipeline named `name`: its `sources` and the parts `_declared` on it."""

    name: str
    sources: dict[str, Source]
    _declared: dict[str, Part]

    def internal_prefixes(self) -> dict[str, str]:
        """Each part's internal topic prefix, `<pipeline>.<name>.`, by the part it is."""
        return {
            f"{part.kind} {part.name!r}": f"{self.name}.{part.name}."
            for part in self.parts()
            if part.own_topics()
        }

    # -- the parts -----------------------------------------------------------------------

    def parts(self) -> list[Part]:
        """Every part: the computations and sinks in the order declared, the injectors of
        its sources, and the queries of its state when a part is queryable."""
        found: list[Part] = [*self._declared.values(), *self._injectors().values()]
        queryable = tuple(p.group for p in found if p.queryable and p.group)
        if queryable:
            found.append(QueriesSpec(self.name, queryable))
        return found

    def part(self, name: str) -> Part:
        """The part named `name`; a configuration error naming the parts there are."""
        for part in self.parts():
            if part.name == name:
                return part
        raise PipelineError(
            f"pipeline {self.name!r} has no part {name!r}; it has "
            + ", ".join(f"{p.kind} {p.name!r}" for p in self.parts())
        )

    @property
    def computations(self) -> Mapping[str, ComputationSpec]:
        """The computations (windows and joins too), by name, in the order declared."""
        return MappingProxyType(
            {n: p for n, p in self._declared.items() if isinstance(p, ComputationSpec)}
        )

    def redeclared(self, part: Part) -> Self:
        """A copy of this pipeline with `part` in place of the one of its name (a rescale's
        new partition count, a test's variation): the checks of a declaration are not run."""
        if part.name not in self._declared:
            raise PipelineError(f"pipeline {self.name!r} declares no {part.kind} {part.name!r}")
        again = copy.copy(self)
        again.sources = dict(self.sources)
        again._declared = {**self._declared, part.name: part}
        return again

    def _injectors(self) -> dict[str, InjectorSpec]:
        streams: dict[str, list[str]] = {}
        processes: dict[str, int] = {}
        for source in self.sources.values():
            if isinstance(source.watermark, InjectorWatermark):
                name = source.watermark.injector
                streams.setdefault(name, []).append(source.stream)
                processes.setdefault(name, source.watermark.processes)
        return {
            name: InjectorSpec(self.name, name, tuple(found), processes[name])
            for name, found in streams.items()
        }

    # -- the graph -----------------------------------------------------------------------

    def writers(self, stream: str) -> list[Part]:
        """The parts that write `stream` (and publish its watermark)."""
        return [p for p in self._declared.values() if stream in p.outputs]

    def channels_of(self, stream: str) -> list[str]:
        """The watermark channels a reader of `stream` learns its watermark from: its
        injector's, its writers', none for a source bounded by its records' times."""
        source = self.sources.get(stream)
        if source is not None:
            if isinstance(source.watermark, InjectorWatermark):
                return [self._injectors()[source.watermark.injector].watermarks]
            return []
        return [w.watermarks for w in self.writers(stream) if w.watermarks]

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
        """Every stream: the sources, then what each part reads and writes."""
        names: dict[str, None] = dict.fromkeys(self.sources)
        for part in self._declared.values():
            names.update(dict.fromkeys(i.stream for i in part.inputs))
            names.update(dict.fromkeys(part.outputs))
        return list(names)

    def validate(self) -> None:
        """Fail with one line naming the fix if the graph cannot run."""
        for part in self._declared.values():
            for i in part.inputs:
                if i.stream not in self.sources and not self.writers(i.stream):
                    raise PipelineError(
                        f"{part.kind} {part.name!r} reads {i.stream!r}, which no computation "
                        f"writes: declare it with pipeline.source({i.stream!r}, ...)"
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
        """Computation `name`; a configuration error naming the computations there are (and
        what `name` is, if it is another part)."""
        part = self._declared.get(name)
        if isinstance(part, ComputationSpec):
            return part
        other = [p.kind for p in self.parts() if p.name == name]
        what = f" ({other[0]} {name!r} is another part)" if other else ""
        raise PipelineError(
            f"pipeline {self.name!r} has no computation {name!r}{what}; "
            f"it has {sorted(self.computations)}"
        )
