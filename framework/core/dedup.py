"""Record-id deduplication (MillWheel §5.3): the `Dedup` declaration, and the ids a task has
seen, kept with its keys' state behind a Bloom filter and collected by event time.

Producers that retry write a record twice, minutes apart; a computation declared with
`dedup=Dedup(...)` drops a record whose id was already seen for the same key. The executor
asks `SeenIds.seen` before the hook and calls `remember` once the hook is done with the record
(run or dead-lettered; not when it is to be retried). New ids (almost every record) are
answered by the Bloom filter alone; a filter hit is confirmed against the pending ids and the
committed ones (`IdBackend`: RocksDB for a Kafka task, memory for the Harness and backfill).
Like timers, ids reach the commit as changes — one journal record per new id, a tombstone when
it is collected — so they are durable in the same transaction as the state they guard.

Collection: once the input low watermark passes a slice boundary `c + horizon_ms`, every id
seen at an event time before `c` goes (slices are a quarter of the horizon, so an id lives
between `horizon_ms` and 1.25 x `horizon_ms` of event time behind the watermark). A record
older than the last collection cannot be checked: it is processed, not remembered, and
counted in `logwheel_dedup_expired_total`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from framework.core.api import MIN_TIME, Record
from framework.core.bloom import SLICES, Generations, item_hash
from framework.core.streams import PipelineError
from framework.serde.codecs import decoder_for, encoder_for

_ABSENT = object()


@dataclass(frozen=True)
class Dedup:
    """Drop records whose id was already seen for the same key within `horizon_ms` of event
    time. `id(record) -> str` gives a record's id (default: `record.id`, the Kafka header
    `logwheel.id`); a record it gives no id for (None, or it raises) is dead-lettered at stage
    "dedup". `expected_ids` (per task partition within one horizon) and `false_positive_rate`
    size the Bloom filter; more ids cost memory, never correctness."""

    id: Callable[[Record], Any] | None = None
    horizon_ms: int = 3_600_000
    expected_ids: int = 1_000_000
    false_positive_rate: float = 0.01

    def __post_init__(self) -> None:
        if self.id is not None and not callable(self.id):
            raise PipelineError(f"Dedup(id={self.id!r}): give a callable record -> str, or None")
        if not isinstance(self.horizon_ms, int) or self.horizon_ms < SLICES:
            raise PipelineError(
                f"Dedup(horizon_ms={self.horizon_ms!r}): give how long (event time, ms) a "
                "producer may re-send a record, e.g. horizon_ms=3_600_000"
            )
        if not isinstance(self.expected_ids, int) or self.expected_ids < 1:
            raise PipelineError(f"Dedup(expected_ids={self.expected_ids!r}): give an int >= 1")
        if not 0 < self.false_positive_rate < 1:
            raise PipelineError(
                f"Dedup(false_positive_rate={self.false_positive_rate!r}): give a rate in (0, 1)"
            )

    def id_of(self, record: Record) -> str:
        """The record's id; ValueError if it has none."""
        rid = record.id if self.id is None else self.id(record)
        if rid is None or rid == "":
            raise ValueError("the record has no id to deduplicate on")
        return rid if type(rid) is str else str(rid)


class IdBackend(Protocol):
    """The committed ids of one task."""

    def id_time(self, key: str, rid: str) -> int | None:
        """When `rid` was seen for `key` (event time), None if it is not held."""

    def ids(self) -> Iterable[tuple[str, str, int]]:
        """Every held (key, id, time), to rebuild the Bloom filter."""

    def ids_between(self, start: int, end: int) -> Iterable[tuple[str, str]]:
        """Held (key, id) seen at event times in [start, end)."""


class SeenIds:
    """The ids one task has seen: Bloom generations in front, pending changes, the backend."""

    def __init__(self, dedup: Dedup, backend: IdBackend) -> None:
        self.horizon_ms = dedup.horizon_ms
        slice_ms = dedup.horizon_ms // SLICES
        self._backend = backend
        self._bloom = Generations(slice_ms, dedup.expected_ids, dedup.false_positive_rate)
        self.collected_before = MIN_TIME  # ids seen before this event time are gone
        self._pending: dict[tuple[str, str], int | None] = {}  # since the last changes()
        self._reported: dict[tuple[str, str], int | None] = {}  # in the commit under way
        for key, rid, time in backend.ids():
            self._bloom.add(item_hash(key, rid), time)

    def seen(self, key: str, rid: str, h: tuple[int, int]) -> bool:
        """Whether `rid` was seen for `key` (and not collected); `h` is `item_hash(key, rid)`."""
        if h not in self._bloom:
            return False  # the common case: no store read
        slot = (key, rid)
        time = self._pending.get(slot, _ABSENT)
        if time is _ABSENT:
            time = self._reported.get(slot, _ABSENT)
            if time is _ABSENT:
                time = self._backend.id_time(key, rid)
        return time is not None

    def remember(self, key: str, rid: str, h: tuple[int, int], time: int) -> None:
        self._bloom.add(h, time)
        self._pending[(key, rid)] = time

    def collect(self, watermark: int) -> None:
        """The input low watermark is `watermark`: forget ids older than the horizon behind it
        (at slice boundaries), with tombstones for the journal."""
        slice_ms = self._bloom.slice_ms
        before = (watermark - self.horizon_ms) // slice_ms * slice_ms
        if before <= self.collected_before or watermark <= MIN_TIME + self.horizon_ms:
            return
        start, self.collected_before = self.collected_before, before
        pending = self._pending
        for slot in self._backend.ids_between(start, before):
            pending[slot] = None
        for held in (self._reported, pending):
            for slot, time in list(held.items()):
                if time is not None and time < before:
                    pending[slot] = None
        self._bloom.drop_before(before)

    def changes(self) -> list[tuple[str, str, int | None]]:
        """(key, id, time, or None: collected) since the last `changes()`."""
        self._reported.update(self._pending)
        out = [(key, rid, time) for (key, rid), time in self._pending.items()]
        self._pending = {}
        return out

    def committed(self) -> None:
        """What `changes()` returned is durable (the backend holds it)."""
        self._reported = {}

    @property
    def filter_bytes(self) -> int:
        return self._bloom.bytes


class MemoryIdBackend:
    """Committed ids in memory, as the id journal would carry them (Harness, backfill)."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, str], int] = {}

    def id_time(self, key: str, rid: str) -> int | None:
        return self.held.get((key, rid))

    def ids(self) -> Iterable[tuple[str, str, int]]:
        return [(key, rid, time) for (key, rid), time in self.held.items()]

    def ids_between(self, start: int, end: int) -> Iterable[tuple[str, str]]:
        return [slot for slot, time in self.held.items() if start <= time < end]

    def apply(self, changes: Iterable[tuple[str, str, int | None]]) -> None:
        for key, rid, time in changes:
            if time is None:
                self.held.pop((key, rid), None)
            else:
                self.held[(key, rid)] = time


_encode_seen = encoder_for("logwheel.SeenId")
_decode_seen = decoder_for("logwheel.SeenId")


def id_key(key: str, rid: str) -> bytes:
    """Kafka key of an id journal record (and its RocksDB key): JSON `[key, id]`."""
    return json.dumps([key, rid], separators=(",", ":")).encode()


def encode_seen(key: str, rid: str, time: int | None) -> bytes | None:
    """An id journal value (None: the id was collected, a tombstone)."""
    if time is None:
        return None
    return _encode_seen({"key": key, "id": rid, "time": time})


def decode_seen(raw: bytes) -> tuple[str, str, int]:
    entry = _decode_seen(raw)
    return entry["key"], entry["id"], entry["time"]
