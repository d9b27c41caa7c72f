"""`pipeline.join(...)`: checks a join's declaration (each mistake refused in one line that
names the fix) and builds it, once, as a computation running `Joined`, whose late records
follow `on_late` and whose output watermark is held so no result is late downstream."""

from __future__ import annotations

from collections.abc import Mapping

from framework.core.computation_spec import ComputationSpec, computation_spec
from framework.core.declarations import KeyExtractor, Percentile, PipelineError
from framework.core.dedup import Dedup
from framework.core.global_tables import GlobalTable
from framework.core.joins.operator import HOWS, Joined, hold_ms


def join_spec(
    pipeline: str,
    name: str,
    *,
    left: str,
    right: str,
    inputs: Mapping[str, KeyExtractor | None],
    before_ms: int,
    after_ms: int,
    grace_ms: int,
    how: str,
    output: str,
    output_schema: str | None,
    output_format: str | None,
    guarantee: str,
    on_late: str,
    on_error: str,
    partitions: int,
    low_watermark: Percentile | None,
    dedup: Dedup | None,
    hook_timeout_ms: int,
    global_tables: Mapping[str, str | GlobalTable] | None,
) -> ComputationSpec:
    """The spec of join `name` (`Pipeline.join` says what each option does), or a
    `PipelineError` naming the fix."""
    where = f"join {name!r}"
    inputs = dict(inputs or {})
    for side, stream in (("left", left), ("right", right)):
        if stream not in inputs:
            raise PipelineError(
                f"{where}: {side}={stream!r} is not among inputs {sorted(inputs)}: give it a key "
                f"extractor, inputs={{{stream!r}: key_by(...) or None, ...}}"
            )
    if left == right:
        raise PipelineError(
            f"{where}: left and right are both {left!r}: join two different streams (copy one "
            "into a stream of its own with a computation to join a stream with itself)"
        )
    if set(inputs) != {left, right}:
        extra = sorted(set(inputs) - {left, right})
        raise PipelineError(
            f"{where}: inputs also name {extra}: a join reads exactly its left and right streams"
        )
    for label, ms in (("before_ms", before_ms), ("after_ms", after_ms), ("grace_ms", grace_ms)):
        if type(ms) is not int:
            raise PipelineError(f"{where}: {label}={ms!r}; give whole milliseconds (an int)")
    if before_ms + after_ms < 0:
        raise PipelineError(
            f"{where}: before_ms + after_ms = {before_ms + after_ms} < 0 makes the window empty "
            "(a right record at t_r matches a left one at t_l when t_l - before_ms <= t_r <= "
            "t_l + after_ms): make before_ms + after_ms >= 0"
        )
    if grace_ms < 0:
        raise PipelineError(f"{where}: grace_ms={grace_ms}; give grace_ms >= 0")
    if how not in HOWS:
        raise PipelineError(f"{where}: how={how!r}; use one of {HOWS}")
    return computation_spec(
        pipeline,
        name,
        lambda: Joined(left, right, before_ms, after_ms, grace_ms, how, output),
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
        kind="join",
        on_late=on_late,
        hold_ms=hold_ms(before_ms, after_ms, grace_ms),
        where=where,
    )
