"""Record-id deduplication (MillWheel §5.3): the `Dedup` declaration, and the ids a task has
seen, kept with its keys' state behind a Bloom filter and collected by event time.

Producers that retry write a record twice, minutes apart; a computation declared with
`dedup=Dedup(...)` drops a record whose id was already seen for the same key. The executor
asks `SeenIds.seen` before the hook and calls `remember` once the hook is done with the record
(run or dead-lettered; not when it is to be retried). New ids (almost every record) are
answered by the Bloom filter alone; a filter hit is confirmed against the pending ids and the
committed ones (`IdBackend`: RocksDB for a Kafka task, memory for the Harness and backfill).

Like timers, ids reach the commit as changes, durable in the same transaction as the state
they guard: a commit's new ids go to the compacted id journal as a few segments (one per
slice of event time, `logwheel.SeenIds`), not one record each, and a segment is deleted with a
tombstone when its slice is collected. Once the input low watermark passes a slice's end plus
`horizon_ms`, its ids go (slices are a quarter of the horizon, so an id lives between
`horizon_ms` and 1.25 x `horizon_ms` of event time behind the watermark). A record older than
the last collection cannot be checked: it is processed, not remembered, and counted in
`logwheel_dedup_expired_total`.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from mmh3 import hash_bytes

from framework.core.api import MIN_TIME, Record
from framework.core.bloom import SLICES, Generations, Probes, item_hash, probes_of
from framework.core.declarations import PipelineError
from framework.errors import BadRecord
from framework.serde.catalogue import decoder_for, encoder_for
from framework.serde.json_codec import decode_json, encode_json

SEGMENT_IDS = 1_000
"""Ids per journal segment at most (a segment of 1,000 ids of 200 bytes fits in 1 MB)."""


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
        """The record's id; `BadRecord` at stage "dedup" if it has none (it is dead-lettered:
        without an id it cannot be deduplicated)."""
        rid = record.id if self.id is None else self.id(record)
        if type(rid) is str and rid:
            return rid
        if rid is None or rid == "":
            raise BadRecord("dedup", "no record id: the record has none to deduplicate on")
        return str(rid)


class Segment(NamedTuple):
    """One id journal record: `value` None is a tombstone (its ids are then unknown here)."""

    key: bytes
    value: bytes | None
    start: int
    ids: list[tuple[str, str]]


class IdBackend(Protocol):
    """The committed ids of one task."""

    def has_id(self, key: str, rid: str) -> bool:
        """Whether `rid` is held for `key`."""

    def id_segments(self) -> Iterable[Segment]:
        """Every held segment, to rebuild the Bloom filter and collect by slice."""


class SeenIds:
    """The ids one task has seen: Bloom generations in front, pending changes, the backend."""

    def __init__(self, dedup: Dedup, backend: IdBackend) -> None:
        self.horizon_ms = dedup.horizon_ms
        self.slice_ms = dedup.horizon_ms // SLICES
        self._backend = backend
        self._bloom = Generations(self.slice_ms, dedup.expected_ids, dedup.false_positive_rate)
        self.collected_before = MIN_TIME  # ids seen before this event time are gone
        self._pending: dict[tuple[str, str], int] = {}  # new since the last changes(): start
        self._reported: dict[tuple[str, str], int] = {}  # in the commit under way
        self._segments: dict[int, list[bytes]] = {}  # slice start -> its journal segments
        self._doomed: list[tuple[bytes, int]] = []  # segments to delete in the next commit
        for segment in backend.id_segments():
            self._segments.setdefault(segment.start, []).append(segment.key)
            for key, rid in segment.ids:
                self._bloom.add(item_hash(key, rid), segment.start)

    @property
    def filter(self) -> Generations:
        """The Bloom generations in front of the ids (their count and size, for a look)."""
        return self._bloom

    def first_seen(self, key: str, rid: str) -> Probes | None:
        """`rid`'s hash if it was not seen for `key` (or was collected), None if it was."""
        h = probes_of(hash_bytes(f"{key}\x00{rid}"))  # item_hash, inlined: per record
        if h not in self._bloom:
            return h  # the common case: no store read
        slot = (key, rid)
        if slot in self._pending or slot in self._reported or self._backend.has_id(key, rid):
            return None
        return h

    def remember(self, key: str, rid: str, h: Probes, time: int) -> None:
        """The hook is done with the record of `rid` (its hash `h`, at `time`)."""
        start = time - time % self.slice_ms
        self._bloom.add(h, start)
        self._pending[(key, rid)] = start

    def collect(self, watermark: int) -> None:
        """The input low watermark is `watermark`: forget the slices that ended more than the
        horizon behind it, with tombstones for their journal segments."""
        if watermark <= MIN_TIME + self.horizon_ms:
            return
        cut = watermark - self.horizon_ms
        before = cut - cut % self.slice_ms
        if before <= self.collected_before:
            return
        self.collected_before = before
        for start in [s for s in self._segments if s < before]:
            self._doomed += [(key, start) for key in self._segments.pop(start)]
        pending = self._pending
        if any(start < before for start in pending.values()):
            self._pending = {slot: s for slot, s in pending.items() if s >= before}
        self._bloom.drop_before(before)

    def changes(self, partition: Callable[[str], int] | None = None) -> list[Segment]:
        """The journal records of the ids seen and collected since the last `changes()`; a
        driver whose keys span journal partitions (the backfill) gives each key's `partition`,
        so that a segment holds the ids of one."""
        out = [Segment(key, None, start, []) for key, start in self._doomed]
        self._doomed = []
        slices: dict[tuple[int, int], list[tuple[str, str]]] = defaultdict(list)
        if partition is None:  # one partition: a segment per slice
            for slot, start in self._pending.items():
                slices[start, 0].append(slot)
        else:
            for slot, start in self._pending.items():
                slices[start, partition(slot[0])].append(slot)
        for (start, _), ids in slices.items():
            for i in range(0, len(ids), SEGMENT_IDS):
                chunk = ids[i : i + SEGMENT_IDS]
                key = json.dumps([start, os.urandom(8).hex()]).encode()
                out.append(Segment(key, encode_segment(start, chunk), start, chunk))
                self._segments.setdefault(start, []).append(key)
        self._reported, self._pending = self._pending, {}
        return out

    def committed(self) -> None:
        """What `changes()` returned is durable (the backend holds it)."""
        self._reported = {}


class MemoryIdBackend:
    """Committed ids in memory, as the id journal would carry them (Harness, backfill)."""

    def __init__(self) -> None:
        self.held: set[tuple[str, str]] = set()
        self.segments: dict[bytes, Segment] = {}

    def has_id(self, key: str, rid: str) -> bool:
        return (key, rid) in self.held

    def id_segments(self) -> Iterable[Segment]:
        return list(self.segments.values())

    def apply(self, segments: Iterable[Segment]) -> None:
        for segment in segments:
            if segment.value is None:
                gone = self.segments.pop(segment.key, None)
                if gone is not None:
                    self.held.difference_update(gone.ids)
            else:
                self.segments[segment.key] = segment
                self.held.update(segment.ids)


_encode_segment = encoder_for("logwheel.SeenIds")
_decode_segment = decoder_for("logwheel.SeenIds")


def encode_segment(start: int, ids: list[tuple[str, str]]) -> bytes:
    return _encode_segment({"start": start, "ids": encode_json(ids)})


def decode_segment(key: bytes, raw: bytes) -> Segment:
    value = _decode_segment(raw)
    return Segment(key, raw, value["start"], [(k, r) for k, r in decode_json(value["ids"])])


def id_entry(key: str, rid: str) -> bytes:
    """A (key, id) as one unambiguous byte string (a store's key for it)."""
    return f"{len(key)}:{key}{rid}".encode()
