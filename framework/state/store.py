"""The local RocksDB store of one task: committed state documents, pending timers, the record
ids a deduplicating computation has seen (the id journal's segments, and a key per id for
confirming a Bloom filter's hit), and the journal offsets they reflect.

The store only ever holds what a committed Kafka transaction made durable (invariant 1), so
it may be deleted at any time: `restore` rebuilds it from the changelog and timer journal
(invariant 2). The checkpoint lives in the same database and is written in the same atomic
batch as the data it describes, so the two can never disagree after a crash.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from rocksdict import WriteOptions

from framework.core.api import Timer
from framework.core.dead_letters import undecodable
from framework.core.dedup import Segment, decode_segment, id_entry
from framework.state.rocks import open_raw, read_json, write_with_position

_STATE = b"s"
_TIMER = b"t"
_SEGMENT = b"g"  # + id journal key -> the segment (a commit's ids of one slice of time)
_ID = b"i"  # + id_entry(key, id) -> b"", for each id a held segment has (_id_changes: "i")
_CHECKPOINT = b"m:checkpoint"
_TOPIC_IDS = b"m:topic-ids"


class TaskStore:
    """RocksDB of one task; values are the exact bytes of the changelog / timer journal."""

    def __init__(self, path: Path, decode_timer: Callable[[bytes], Timer]) -> None:
        self.path = path
        self._decode_timer = decode_timer
        self._open()
        # The changelog is the write-ahead log; a crash loses at most what restore re-reads.
        self._write_options = WriteOptions()
        self._write_options.disable_wal = True

    def _open(self) -> None:
        self._db = open_raw(self.path)

    # -- what the executor reads -----------------------------------------------------------

    def load(self, key: str) -> bytes | None:
        """The committed, encoded state document of `key` (as the changelog carries it)."""
        return self._db.get(_STATE + key.encode())

    def load_all(self) -> Iterator[tuple[str, Timer]]:
        for raw_key, raw in self._db.items(from_key=_TIMER):
            if not raw_key.startswith(_TIMER):
                break
            try:
                key, _tag = json.loads(raw_key[1:])
                timer = self._decode_timer(raw)
            except Exception as error:
                undecodable("timers", error)
                continue
            yield key, timer

    def has_id(self, key: str, rid: str) -> bool:
        return self._db.get(_ID + id_entry(key, rid)) is not None

    def id_segments(self) -> Iterator[Segment]:
        for raw_key, raw in self._db.items(from_key=_SEGMENT):
            if not raw_key.startswith(_SEGMENT):
                break
            try:
                yield decode_segment(raw_key[1:], raw)
            except Exception as error:
                undecodable("ids", error)

    # -- what commits and restores write ---------------------------------------------------

    def checkpoint(self) -> dict[str, int]:
        """Next offset to read per journal topic (`changelog`, `timers`); empty if none."""
        return read_json(self._db, _CHECKPOINT, {})

    def apply(
        self,
        states: Iterable[tuple[bytes, bytes | None]],
        timers: Iterable[tuple[bytes, bytes | None]],
        checkpoint: dict[str, int],
        ids: Iterable[Segment] = (),
    ) -> None:
        """Write committed changes (key bytes, value bytes or None to delete) atomically with
        the checkpoint that says which journal offsets they reflect."""
        changes = itertools.chain(
            ((_STATE + key, value) for key, value in states),
            ((_TIMER + key, value) for key, value in timers),
            self._id_changes(ids),
        )
        merged = {**self.checkpoint(), **checkpoint}
        write_with_position(self._db, changes, _CHECKPOINT, merged, self._write_options)

    def _id_changes(self, segments: Iterable[Segment]) -> Iterator[tuple[bytes, bytes | None]]:
        """Id journal segments as store writes: the segment, and a key per id it holds (a
        tombstone reads the segment it deletes to find them, from this batch or the store)."""
        fresh: dict[bytes, list[tuple[str, str]]] = {}  # segments written in this batch
        for segment in segments:
            ids, value = segment.ids, segment.value
            if value is None:
                if segment.key in fresh:
                    ids = fresh.pop(segment.key)
                else:
                    raw = self._db.get(_SEGMENT + segment.key)
                    ids = [] if raw is None else self._decoded(segment.key, raw).ids
            else:
                if not ids:  # read from the journal: decode it
                    ids = self._decoded(segment.key, value).ids
                fresh[segment.key] = ids
            mark = None if value is None else b""
            # id_entry, inlined: one write per id seen, the bulk of a deduplicating commit
            yield from [(f"i{len(key)}:{key}{rid}".encode(), mark) for key, rid in ids]
            yield _SEGMENT + segment.key, value

    @staticmethod
    def _decoded(key: bytes, raw: bytes) -> Segment:
        try:
            return decode_segment(key, raw)
        except Exception as error:
            undecodable("ids", error)
            return Segment(key, raw, 0, [])

    def topic_ids(self) -> dict[str, str]:
        """Ids of the journal topics the checkpoint counts offsets of (empty if unknown)."""
        return read_json(self._db, _TOPIC_IDS, {})

    def set_topic_ids(self, ids: dict[str, str]) -> None:
        self._db.put(_TOPIC_IDS, json.dumps(ids).encode())

    def wipe(self) -> None:
        """Delete everything: the store is rebuilt from the journals (task corrupted)."""
        self._db.close()
        shutil.rmtree(self.path, ignore_errors=True)
        self._open()

    def close(self) -> None:
        self._db.close()
