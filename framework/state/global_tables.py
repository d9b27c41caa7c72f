"""The global tables of one `logwheel run` process (framework/core/global_tables.py says what
they are): a RocksDB replica per table under the computation's state directory, shared by
all of the process's tasks, holding every partition of the topic and, with it, the next
offset of each (and the newest record time seen) — written in the same batch as the data, so
a restart reads only what was written since (`logwheel_global_table_records_read_total`
and the log line after each catch-up say how much was read).

When the first task starts, every table is read to the end offsets the broker reports then;
before each batch of records (and each new task) the tables are read at least to their ends
again, as the co-partitioned tables are (framework/state/tables.py), so a record never meets a
table older than what was committed before it was read. Values are kept raw and decoded on
lookup like any table's: a value that cannot be decoded is a `DecodeError` naming the table
and the key, which dead-letters the record whose hook read it. A table record without a key
cannot be looked up: it is counted in `logwheel_global_table_records_skipped_total` and
logged, never applied.

Layout of a table with history: `len(key) (4 bytes) + key + (timestamp + 2**63) (8 bytes,
big-endian)` -> `b"\\x01" + value`, or `b"\\x00"` for a tombstone, so a key's versions sort by
time and `seek_for_prev` finds the version current at any time. Without history: key ->
value, the latest by offset (deleted by a tombstone).
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from rocksdict import Rdict

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.global_tables import (
    GlobalTable,
    answer,
    check_as_of,
    horizon_of,
    merged,
    pruned,
    table_time,
)
from framework.core.metrics import GLOBAL_TABLE_RECORDS, GLOBAL_TABLE_SKIPPED
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import table_decoder
from framework.kafka.topic_ends import watermark_offsets
from framework.serde.codecs import Decoder
from framework.state.following import Follower
from framework.state.rocks import open_raw, read_json, write_with_position
from framework.state.tables import Tables, TableView

log = logging.getLogger(__name__)

_META = b"\xff\xff\xff\xff"  # a key length no key has: the versioned layout's own entries
_POSITION = {False: b"\x00logwheel:position", True: _META + b"logwheel:position"}
_TS = struct.Struct(">Q")
_BIAS = 2**63
_PRESENT, _TOMBSTONE = b"\x01", b"\x00"


def _prefix(key: bytes) -> bytes:
    return len(key).to_bytes(4, "big") + key


def _at(prefix: bytes, ts: int) -> bytes:
    return prefix + _TS.pack(max(0, min(ts + _BIAS, 2**64 - 1)))


class GlobalReplica:
    """One global table's replica: every partition of its topic in one RocksDB."""

    def __init__(
        self, computation: str, name: str, table: GlobalTable, path: Path, decode: Decoder
    ) -> None:
        self.name, self.table = name, table
        self._read_total = GLOBAL_TABLE_RECORDS.labels(computation, name)
        self._skipped_total = GLOBAL_TABLE_SKIPPED.labels(computation, name, "no key")
        self.versioned = table.history_ms is not None
        self.db = open_raw(path)
        stored = read_json(self.db, _POSITION[self.versioned], {})
        self.positions: dict[int, int] = {int(p): o for p, o in stored.get("offsets", {}).items()}
        self.newest: int = stored.get("newest", MIN_TIME)
        self.read = 0  # records applied since opened
        self.view = (VersionedView if self.versioned else LatestView)(
            name, table.topic, self.db, decode, self
        )

    @property
    def horizon(self) -> int:
        return horizon_of(self.newest, self.table.history_ms)

    def apply(self, msgs: list[Message], positions: dict[int, int]) -> None:
        """Write a batch of the topic's records, the partitions' new positions and the newest
        record time, atomically."""
        kept = self._kept(msgs)
        changes = self._versions(kept) if self.versioned else [(m.key(), m.value()) for m in kept]
        self.positions.update(positions)
        offsets = {str(p): o for p, o in self.positions.items()}
        position = {"offsets": offsets, "newest": self.newest}
        write_with_position(self.db, changes, _POSITION[self.versioned], position)
        self.read += len(msgs)
        if msgs:
            self._read_total.inc(len(msgs))

    def _kept(self, msgs: list[Message]) -> list[Message]:
        """The records to apply: those with a key (the others counted and logged)."""
        kept = [m for m in msgs if m.key() is not None]
        if len(kept) < len(msgs):
            self._skipped_total.inc(len(msgs) - len(kept))
            log.warning(
                "global table %r (%s): %d records without a key not applied (a table is "
                "looked up by key)",
                self.name,
                self.table.topic,
                len(msgs) - len(kept),
            )
        return kept

    def _versions(self, msgs: list[Message]) -> list[tuple[bytes, bytes | None]]:
        """The batch's new versions, and the versions of its keys they leave unneeded."""
        pending: dict[bytes, dict[int, bytes | None]] = {}
        wall = now_ms()
        for msg in msgs:
            ts = msg.timestamp()[1]
            pending.setdefault(msg.key(), {})[ts] = msg.value()
            self.newest = table_time(self.newest, ts, wall)
        horizon, changes = self.horizon, []
        for key, news in pending.items():
            prefix = _prefix(key)
            for ts, value in news.items():
                changes.append((_at(prefix, ts), _TOMBSTONE if value is None else _PRESENT + value))
            tombs = {ts: value is None for ts, value in news.items()}
            for ts in pruned(merged(self._stored(prefix), tombs), horizon):
                changes.append((_at(prefix, ts), None))  # after its put: the batch drops it
        return changes

    def _stored(self, prefix: bytes) -> Iterator[tuple[int, bool]]:
        """The key's stored versions `(timestamp, is_tombstone)`, oldest first, read lazily."""
        it = self.db.iter()
        it.seek(prefix)
        while it.valid():
            at = it.key()
            if len(at) != len(prefix) + _TS.size or not at.startswith(prefix):
                return
            yield _TS.unpack(at[len(prefix) :])[0] - _BIAS, it.value() == _TOMBSTONE
            it.next()

    def close(self) -> None:
        self.db.close()


class LatestView(TableView):
    """A global table without history, read as a co-partitioned table is."""

    def __init__(self, name: str, topic: str, db: Rdict, decode: Decoder, replica: Any) -> None:
        super().__init__(name, topic, db, decode)

    def get(self, key: str, default: Any = None, *, as_of: int | None = None) -> Any:
        if as_of is not None:
            check_as_of(self.name, None, as_of)
        return super().get(key, default)


class VersionedView(TableView):
    """A global table with history: `get(key)`, `get(key, as_of=ms)`, `in` (the latest)."""

    def __init__(
        self, name: str, topic: str, db: Rdict, decode: Decoder, replica: GlobalReplica
    ) -> None:
        super().__init__(name, topic, db, decode)
        self._replica = replica

    def _found(self, key: str, ts: int) -> tuple[int, bytes | None] | None:
        """The key's latest version stamped at or before `ts` (value None: a tombstone)."""
        prefix = _prefix(key.encode())
        it = self._db.iter()
        it.seek_for_prev(_at(prefix, ts))
        if not it.valid():
            return None
        at = it.key()
        if len(at) != len(prefix) + _TS.size or not at.startswith(prefix):
            return None
        raw = it.value()
        return _TS.unpack(at[len(prefix) :])[0] - _BIAS, None if raw == _TOMBSTONE else raw[1:]

    def get(self, key: str, default: Any = None, *, as_of: int | None = None) -> Any:
        if as_of is None:
            found = self._found(key, _BIAS - 1)
            raw = None if found is None else found[1]
        else:
            replica = self._replica
            check_as_of(self.name, replica.table.history_ms, as_of)
            raw = answer(self.name, key, self._found(key, as_of), as_of, replica.horizon)
        return default if raw is None else self.decoded(key, raw)

    def __contains__(self, key: str) -> bool:
        found = self._found(key, _BIAS - 1)
        return found is not None and found[1] is not None


class GlobalTables:
    """The global tables of one membership of a computation, read with one consumer; the
    replicas outlive it on disk (a new membership resumes them)."""

    def __init__(
        self,
        consumer: Consumer,
        pipeline: Pipeline,
        spec: ComputationSpec,
        state_dir: Path,
        counts: dict[str, int],  # every topic's partition count (the runner checked ours exist)
        registry: RegistrySettings | None = None,
    ) -> None:
        self.consumer = consumer
        self.spec = spec
        self._follower = Follower(consumer)
        self.replicas: dict[str, GlobalReplica] = {}
        try:
            for name, table in spec.global_tables.items():
                decode = table_decoder(pipeline, table.topic, registry)
                path = state_dir / "global" / name
                self.replicas[name] = GlobalReplica(spec.name, name, table, path, decode)
        except BaseException:
            self.close()
            raise
        self._counts = counts
        self._started = False

    def _start(self) -> None:
        """Assign every partition of every table at its replica's position (the log's start
        if it moved past it) and read them all to their end."""
        assigned = []
        for replica in self.replicas.values():
            topic = replica.table.topic
            for p in range(self._counts[topic]):
                low, _ = watermark_offsets(self.consumer, TopicPartition(topic, p))
                if replica.positions.get(p, OFFSET_BEGINNING) < low:  # new, or log start moved
                    replica.apply([], {p: low})
                self._follower.replicas[(topic, p)] = replica
                assigned.append(TopicPartition(topic, p, replica.positions[p]))
        self.consumer.incremental_assign(assigned)
        started = time.monotonic()
        self._follower.sync(self._follower.replicas)
        self._started = True
        for replica in self.replicas.values():
            log.info(
                "%s: global table %r (%s) read to its end: %d records in %.1fs",
                self.spec.group,
                replica.name,
                replica.table.topic,
                replica.read,
                time.monotonic() - started,
            )

    def add(self, partition: int) -> dict[str, TableView]:
        """The views for a new task: every table read to its end first."""
        if not self._started:
            self._start()
        else:
            self.sync([partition])
        return {name: replica.view for name, replica in self.replicas.items()}

    def remove(self, partition: int) -> None:
        """A task left: the replicas stay (they serve every task)."""

    def sync(self, partitions: Iterable[int]) -> None:
        """Before a batch of the tasks of `partitions` (if any): every table read at least to
        the ends the broker reports now."""
        if self._started and any(True for _ in partitions):
            self._follower.sync(self._follower.replicas)

    def step(self, timeout: float = 0.0) -> None:
        if self._started:
            self._follower.step(timeout)

    def close(self) -> None:
        for replica in self.replicas.values():
            replica.close()
        self.replicas.clear()
        self.consumer.close()


class TableSet:
    """A membership's co-partitioned tables and global tables, used by the task manager and
    the loop as one: `add(partition)` gives a task every view."""

    def __init__(self, *parts: Any) -> None:
        self.parts = [part for part in parts if part is not None]

    def add(self, partition: int) -> dict[str, TableView]:
        views: dict[str, TableView] = {}
        for part in self.parts:
            views.update(part.add(partition))
        return views

    def remove(self, partition: int) -> None:
        for part in self.parts:
            part.remove(partition)

    def sync(self, partitions: Iterable[int]) -> None:
        partitions = list(partitions)
        for part in self.parts:
            part.sync(partitions)

    def step(self, timeout: float = 0.0) -> None:
        for part in self.parts:
            part.step(timeout)

    def close(self) -> None:
        for part in self.parts:
            part.close()


def table_set(
    consumer: Callable[[], Consumer],
    pipeline: Pipeline,
    spec: ComputationSpec,
    state_dir: Path,
    counts: dict[str, int],
    registry: RegistrySettings | None = None,
) -> TableSet | None:
    """The tables of a membership of `spec` (None if it declares none), each kind read with a
    consumer of its own made by `consumer()`."""
    if not spec.tables and not spec.global_tables:
        return None
    tables = Tables(consumer(), pipeline, spec, state_dir, registry) if spec.tables else None
    try:
        globals_ = (
            GlobalTables(consumer(), pipeline, spec, state_dir, counts, registry)
            if spec.global_tables
            else None
        )
    except BaseException:
        if tables is not None:
            tables.close()
        raise
    return TableSet(tables, globals_)
