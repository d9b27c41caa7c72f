"""`pipeline.windowed(...)`: checks a windowed aggregation's declaration (each mistake refused in
one line that names the fix) and builds it, once, as a computation running `Windowed`, whose late
records follow `on_late` and whose output watermark is held by the grace, so no result is late
downstream."""

from __future__ import annotations

from collections.abc import Mapping

from framework.core.computation_spec import ComputationSpec, computation_spec
from framework.core.declarations import EMITS, KeyExtractor, Percentile, PipelineError
from framework.core.dedup import Dedup
from framework.core.global_tables import GlobalTable
from framework.core.windows.aggregates import Aggregate
from framework.core.windows.operator import Windowed
from framework.core.windows.shapes import Hopping, Session, Window


def windowed_spec(
    pipeline: str,
    name: str,
    *,
    inputs: Mapping[str, KeyExtractor | None],
    window: Window,
    aggregate: Aggregate,
    output: str,
    output_schema: str | None,
    output_format: str | None,
    emit: str,
    guarantee: str,
    on_late: str,
    on_error: str,
    partitions: int,
    low_watermark: Percentile | None,
    dedup: Dedup | None,
    hook_timeout_ms: int,
    global_tables: Mapping[str, str | GlobalTable] | None,
) -> ComputationSpec:
    """The spec of windowed computation `name` (`Pipeline.windowed` says what each option
    does), or a `PipelineError` naming the fix."""
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
    return computation_spec(
        pipeline,
        name,
        lambda: Windowed(window, aggregate, output, emit),
        inputs=inputs,
        outputs={output: output_schema},
        guarantee=guarantee,
        partitions=partitions,
        state_schema=None,
        on_error=on_error,
        tables=None,
        formats={output: output_format} if output_format else None,
        low_watermark=low_watermark,
        dedup=dedup,
        hook_timeout_ms=hook_timeout_ms,
        global_tables=global_tables,
        kind="window",
        on_late=on_late,
        hold_ms=window.grace_ms,
        where=where,
    )
