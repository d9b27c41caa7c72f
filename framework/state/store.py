"""The local RocksDB store of one task: committed state documents, pending timers, and the
changelog offsets they reflect.

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
from framework.state.rocks import open_raw, read_json, write_with_position

_STATE = b"s"
_TIMER = b"t"
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

    # -- what commits and restores write ---------------------------------------------------

    def checkpoint(self) -> dict[str, int]:
        """Next offset to read per journal topic (`changelog`, `timers`); empty if none."""
        return read_json(self._db, _CHECKPOINT, {})

    def apply(
        self,
        states: Iterable[tuple[bytes, bytes | None]],
        timers: Iterable[tuple[bytes, bytes | None]],
        checkpoint: dict[str, int],
    ) -> None:
        """Write committed changes (key bytes, value bytes or None to delete) atomically with
        the checkpoint that says which journal offsets they reflect."""
        changes = itertools.chain(
            ((_STATE + key, value) for key, value in states),
            ((_TIMER + key, value) for key, value in timers),
        )
        merged = {**self.checkpoint(), **checkpoint}
        write_with_position(self._db, changes, _CHECKPOINT, merged, self._write_options)

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
