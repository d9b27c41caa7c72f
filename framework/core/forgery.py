"""Internal records no logwheel writer could have written, refused before they count.

Marks and timer entries travel on ordinary topics (`<pipeline>.<computation>.watermarks`,
`.timers`) that only ACLs keep others from writing. A reader therefore checks what it can
check without trusting the writer: a mark must name the partition it speaks for (every writer
names each partition of its outputs, -1 where it wrote nothing), no offset beyond that
partition's end (the caller asks the broker) and no time further ahead of wall time than the
pipeline's skew allowance; a timer entry must decode and sit under its own journal key. A
refused record is never applied; the caller dead-letters it (stage "watermark" or "timers").
What these checks cannot tell apart from a genuine record — a well-formed mark within the
allowance, a well-formed timer entry — only the ACLs of `logwheel acls` keep out. A timer's
time is not held to the allowance: hooks and windows set event-time timers days ahead (a
daily window's end), which no reader can tell from a forged one.
"""

from __future__ import annotations

from collections.abc import Iterable

from framework.core.api import EVENT, PROCESSING, Timer
from framework.core.declarations import (
    DEFAULT_MAX_FUTURE_MS,
    BoundedOutOfOrderness,
    InjectorWatermark,
)
from framework.core.pipeline import Pipeline
from framework.core.timers import decode_timer_entry, timer_key
from framework.core.watermarks import Mark
from framework.errors import ForgedRecord

MARK_SKEW_MS = 60_000
"""Slack for a mark's time on top of the sources' allowance: marks are read on other hosts,
whose clocks may stand a little behind the writer's."""
DEFAULT_ALLOWANCE_MS = DEFAULT_MAX_FUTURE_MS + MARK_SKEW_MS


def allowance(policies: Iterable[object]) -> int:
    """How far ahead of wall time a mark of a pipeline may claim: the largest `max_future_ms`
    of its sources' watermark policies (the default where none says), plus `MARK_SKEW_MS`."""
    futures = [
        p.max_future_ms
        for p in policies
        if isinstance(p, BoundedOutOfOrderness | InjectorWatermark)
    ]
    return max(futures, default=DEFAULT_MAX_FUTURE_MS) + MARK_SKEW_MS


def pipeline_allowance(pipeline: Pipeline) -> int:
    """`allowance` of the watermark policies of `pipeline`'s sources."""
    return allowance(source.watermark for source in pipeline.sources.values())


def check_mark(mark: Mark, now: int, allowance_ms: int) -> None:
    """ForgedRecord (stage "watermark") if the mark claims a time beyond `now` plus the
    allowance, or offsets no partition can have."""
    limit = now + allowance_ms
    for name, value in (("watermark", mark.watermark), ("input watermark", mark.input_watermark)):
        if value > limit:
            raise ForgedRecord(
                "watermark",
                f"mark of {mark.producer!r}: its {name} {value} is {value - now} ms ahead of "
                f"wall time, beyond the allowance of {allowance_ms} ms",
            )
    for (topic, partition), offset in mark.offsets.items():
        if partition < 0 or offset < -1:
            raise ForgedRecord(
                "watermark", f"mark of {mark.producer!r}: offset {offset} of {topic}[{partition}]"
            )


def check_names(mark: Mark, topic: str, partition: int) -> None:
    """ForgedRecord unless the mark names `topic`[`partition`]: a genuine writer names every
    partition of its outputs, so a mark without it would apply before the data it speaks for."""
    if (topic, partition) not in mark.offsets:
        raise ForgedRecord(
            "watermark",
            f"mark of {mark.producer!r} names no offset of {topic}[{partition}], which every "
            "writer's mark does",
        )


def check_ends(mark: Mark, ends: dict[tuple[str, int], int]) -> None:
    """ForgedRecord if the mark names an offset at or beyond a partition's end (`ends`: the
    partitions checked, by their end offsets): it would hold its producer's later marks back
    for good. A genuine mark follows the records it names, which are in the log already."""
    for tp, end in ends.items():
        offset = mark.offsets.get(tp, -1)
        if offset >= end:
            raise ForgedRecord(
                "watermark",
                f"mark of {mark.producer!r}: offset {offset} of {tp[0]}[{tp[1]}] lies beyond "
                f"its end ({end})",
            )


def checked_timer(key: bytes | None, raw: bytes) -> Timer:
    """The timer a journal record carries; ForgedRecord (stage "timers") if it does not
    decode, names another (key, tag) than its journal key, or an unknown domain."""
    try:
        entry = decode_timer_entry(raw)
    except Exception as error:
        raise ForgedRecord("timers", f"undecodable timer entry: {error}", error) from error
    if key != timer_key(entry["key"], entry["tag"]):
        raise ForgedRecord(
            "timers", f"timer entry for {entry['key']!r}/{entry['tag']!r} under another key"
        )
    if entry["domain"] not in (EVENT, PROCESSING):
        raise ForgedRecord("timers", f"timer entry with domain {entry['domain']!r}")
    return Timer(entry["time"], entry["tag"], entry["domain"])
