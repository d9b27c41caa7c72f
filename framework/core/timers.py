"""Pending timers of one task, both domains, one per (key, tag) (MillWheel §4.4, §5.3).

The driver (executor) sets, cancels and pops due timers; the commit takes `changes()` against
the committed view and writes them to the timer journal, then calls `committed()`. The
journal's records (`timer_key`, `encode_timer`) and a committed view held in memory (the
Harness's and the backfill's) live here too.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Iterable, Iterator

from framework.core.api import EVENT, PROCESSING, Timer
from framework.serde.catalogue import decoder_for, encoder_for


class TimerService:
    """All pending timers of one task, both domains: one per (key, tag).

    One heap per domain ordered by (time, key, tag), with lazy deletion: an entry is live only
    while its sequence number is the one recorded for its (key, tag), so set, cancel and pop
    are O(log n). `changes()` reports (key, tag, timer or None) against the committed view.
    """

    def __init__(self, pending: Iterable[tuple[str, Timer]] = ()) -> None:
        self._live: dict[tuple[str, str], tuple[Timer, int]] = {}
        self._heaps: dict[str, list[tuple[int, str, str, int]]] = {EVENT: [], PROCESSING: []}
        self._seq = itertools.count()
        self._baseline: dict[tuple[str, str], Timer | None] = {}  # committed values of changed
        self._reported: dict[tuple[str, str], Timer | None] = {}
        for key, timer in pending:
            seq = next(self._seq)
            self._live[(key, timer.tag)] = (timer, seq)
            self._heaps[timer.domain].append((timer.time, key, timer.tag, seq))
        for heap in self._heaps.values():
            heapq.heapify(heap)

    def get(self, key: str, tag: str) -> Timer | None:
        entry = self._live.get((key, tag))
        return None if entry is None else entry[0]

    def set(self, key: str, timer: Timer) -> None:
        """Set (or move) the timer `timer.tag` of `key`."""
        slot = (key, timer.tag)
        entry = self._live.get(slot)
        if entry is not None and entry[0] == timer:
            return
        if slot not in self._baseline:
            self._baseline[slot] = None if entry is None else entry[0]
        seq = next(self._seq)
        self._live[slot] = (timer, seq)
        heapq.heappush(self._heaps[timer.domain], (timer.time, key, timer.tag, seq))
        if len(self._heaps[timer.domain]) > 2 * len(self._live) + 64:
            self._compact()

    def cancel(self, key: str, tag: str) -> None:
        slot = (key, tag)
        entry = self._live.pop(slot, None)
        if entry is not None and slot not in self._baseline:
            self._baseline[slot] = entry[0]

    def earliest(self, domain: str) -> int | None:
        """Time of the earliest pending timer of `domain`, None if there is none."""
        heap, live = self._heaps[domain], self._live
        while heap:
            t, key, tag, seq = heap[0]
            entry = live.get((key, tag))
            if entry is not None and entry[1] == seq:
                return t
            heapq.heappop(heap)
        return None

    def pop_due(self, domain: str, until: int) -> tuple[str, Timer] | None:
        """Remove and return the earliest timer of `domain` with time <= `until` (ties by key,
        then tag), or None. A popped timer counts as deleted."""
        t = self.earliest(domain)
        if t is None or t > until:
            return None
        _, key, tag, _ = heapq.heappop(self._heaps[domain])
        slot = (key, tag)
        timer = self._live.pop(slot)[0]
        if slot not in self._baseline:
            self._baseline[slot] = timer
        return key, timer

    def changes(self) -> list[tuple[str, str, Timer | None]]:
        """(key, tag, timer) whose pending timer differs from the committed one since the last
        `committed()`; None means deleted (cancelled or fired)."""
        out = []
        for slot, before in self._baseline.items():
            entry = self._live.get(slot)
            now = None if entry is None else entry[0]
            self._reported[slot] = now
            if now != before:
                out.append((slot[0], slot[1], now))
        return out

    def committed(self) -> None:
        """What the last `changes()` returned is durable; later changes stay pending."""
        for slot, value in self._reported.items():
            entry = self._live.get(slot)
            if (None if entry is None else entry[0]) == value:
                del self._baseline[slot]
            else:
                self._baseline[slot] = value
        self._reported = {}

    def pending(self) -> Iterator[tuple[str, Timer]]:
        """Every pending timer as (key, timer), in no particular order."""
        for (key, _), (timer, _) in self._live.items():
            yield key, timer

    def __len__(self) -> int:
        return len(self._live)

    def _compact(self) -> None:
        for domain in self._heaps:
            self._heaps[domain] = []
        for (key, tag), (timer, seq) in self._live.items():
            self._heaps[timer.domain].append((timer.time, key, tag, seq))
        for heap in self._heaps.values():
            heapq.heapify(heap)


class MemoryTimerBackend:
    """Committed pending timers, as the timer journal would carry them."""

    def __init__(self) -> None:
        self.timers: dict[tuple[str, str], Timer] = {}

    def load_all(self) -> Iterable[tuple[str, Timer]]:
        return [(key, timer) for (key, _), timer in self.timers.items()]

    def apply(self, changes: Iterable[tuple[str, str, Timer | None]]) -> None:
        for key, tag, timer in changes:
            if timer is None:
                self.timers.pop((key, tag), None)
            else:
                self.timers[(key, tag)] = timer


_encode_timer = encoder_for("logwheel.TimerEntry")


_decode_timer_entry = decoder_for("logwheel.TimerEntry")


def encode_timer(key: str, tag: str, timer: Timer | None) -> bytes | None:
    """A timer journal value (None: the timer is gone, a tombstone)."""
    if timer is None:
        return None
    return _encode_timer({"key": key, "tag": tag, "time": timer.time, "domain": timer.domain})


def decode_timer_entry(raw: bytes) -> dict:
    """A timer journal value as its record: key, tag, time, domain."""
    return _decode_timer_entry(raw)


def decode_timer(raw: bytes) -> Timer:
    entry = _decode_timer_entry(raw)
    return Timer(entry["time"], entry["tag"], entry["domain"])


def timer_key(key: str, tag: str) -> bytes:
    """Kafka key of a timer journal record (and its RocksDB key): JSON `[key, tag]`."""
    return json.dumps([key, tag], separators=(",", ":")).encode()
