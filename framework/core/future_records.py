"""Source records stamped beyond their source's skew allowance, and the time they are filed
under: the one rule `run`, `backfill` and the Harness share.

A record of a `BoundedOutOfOrderness` source stamped more than `max_future_ms` ahead of wall
time (a producer with a wrong clock, or a hostile one) moves no watermark at all
(`watermarks.BoundedLateness` does not see it), so no genuine record, however far behind the
clock, becomes late because of it. It is counted and processed, or under
`on_future="dead_letter"` dead-lettered at stage "future".

A processed one is filed — its `Record.timestamp`, and so its `Dedup` slice, its windows, its
timers' default times and its productions' timestamps — under the latest time its source may
claim: wall time plus the allowance. Why there and not at its own time: every piece of state
keyed by event time (a Bloom generation per slice of `Dedup`, a window, a timer) is collected
once the watermark passes it, and the watermark never reaches a time the clock has not; filed
at its own time (years ahead, say), each such record would keep state no collection reaches,
and rebuild it at every start. Why not at the watermark: that is unknown at first and far
behind the clock in a replay, where it would make the record late or land it in a window
already closed. Wall time plus the allowance is where a record just within the allowance
already lands: the mapping `min(timestamp, limit)` keeps the order of what it does not
change, and what it files there is collected as genuine time passes, like any other record.
"""

from __future__ import annotations

from collections.abc import Iterable

from framework.core.declarations import BoundedOutOfOrderness
from framework.core.pipeline import Pipeline
from framework.errors import FutureRecord


def future_policy(pipeline: Pipeline, stream: str) -> BoundedOutOfOrderness | None:
    """The skew allowance records of `stream` are held to: its `BoundedOutOfOrderness` if it
    is a source with one, else None (an internal stream carries times its writers filed)."""
    source = pipeline.sources.get(stream)
    if source is not None and isinstance(source.watermark, BoundedOutOfOrderness):
        return source.watermark
    return None


def future_limit(policy: BoundedOutOfOrderness, wall: int) -> int:
    """The latest timestamp a record may carry at wall time `wall` (ms), and the time one
    stamped beyond it is filed under."""
    return wall + policy.max_future_ms


def future_limits(pipeline: Pipeline, streams: Iterable[str], wall: int) -> dict[str, int]:
    """`future_limit` at `wall` of each of `streams` held to an allowance, by name (a source's
    topic is its name)."""
    policies = {s: p for s in streams if (p := future_policy(pipeline, s)) is not None}
    return {s: future_limit(p, wall) for s, p in policies.items()}


def future_error(policy: BoundedOutOfOrderness, timestamp: int) -> FutureRecord:
    """The reason a record stamped `timestamp` is dead-lettered (`on_future="dead_letter"`)."""
    return FutureRecord(
        "future",
        f"timestamp {timestamp} is more than max_future_ms={policy.max_future_ms} "
        "ahead of wall time",
    )
