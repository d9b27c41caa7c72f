"""`pipeline.join(...)`: checks a join's declaration (each mistake refused in one line that
names the fix) and declares it as an ordinary computation running `Joined`, whose late records
follow `on_late` and whose output watermark is held so no result is late downstream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from framework.core.declarations import LATE_POLICIES, KeyExtractor, PipelineError
from framework.core.joins.operator import HOWS, Joined, hold_ms

NOT_FOR_A_JOIN = {
    "outputs": "it writes one stream, named by output= (output_schema=, output_format=)",
    "formats": "give output_format= for its one output",
    "state_schema": "its state is its open records, kept as JSON",
    "tables": "no hook of yours runs in a join to read them",
}


def declare_join(
    pipeline: Any,  # framework.core.pipeline.Pipeline, which imports this module
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
    on_late: str = "drop",
    **options: Any,
) -> None:
    """Declare join `name` on `pipeline` (CONTRACT.md, "Joins between streams"): per key, a
    right record at t_r meets a left one at t_l when t_l - before_ms <= t_r <= t_l + after_ms;
    each pair is produced once on `output` as {"key", "left", "right"}; with how="left" or
    "outer", a record no partner matched is produced alone once its window closes (the input
    low watermark passes its time + after_ms (left) or before_ms (right) + grace_ms); a record
    whose own window closed before it came is late (`on_late`). `options` go to
    `pipeline.computation` as they are (guarantee, on_error, partitions, low_watermark, dedup,
    hook_timeout_ms, ...), but for those that make no sense for a join."""
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
    if on_late not in LATE_POLICIES:
        raise PipelineError(f"{where}: on_late={on_late!r}; use one of {LATE_POLICIES}")
    for option in sorted(set(options) & set(NOT_FOR_A_JOIN)):
        raise PipelineError(f"{where}: {option}= is not for a join: {NOT_FOR_A_JOIN[option]}")
    pipeline.computation(
        name,
        lambda: Joined(left, right, before_ms, after_ms, grace_ms, how, output),
        inputs=inputs,
        outputs={output: output_schema},
        formats={output: output_format} if output_format else None,
        **options,
    )
    pipeline.computations[name] = replace(
        pipeline.computations[name],
        on_late=on_late,
        hold_ms=hold_ms(before_ms, after_ms, grace_ms),
        kind="join",
    )
