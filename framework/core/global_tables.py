"""Global tables (Kafka Streams' GlobalKTable, Faust's GlobalTable): a topic every task of a
computation reads whole — every partition, no co-partitioning — and, with `history_ms`, each
key's earlier values for that span of record time, so that a lookup as of a record's time
answers what the table held then (the backfill of old records then computes what the live
job computed when they were new).

What this module owns is what every runtime shares: the declaration (`GlobalTable`,
`declare_global_tables`, called by `computation`, `windowed` and `join` alike) and the pure
logic of a versioned table — which versions a key keeps (`pruned`), what a lookup answers
(`answer`) — and the in-memory table of the Harness and the backfill (`MemoryGlobalTable`).
The RocksDB replica of `logwheel run` (framework/state/global_tables.py) keeps the same
versions under the same rules.

The rules of a versioned table (history_ms set):

- A version is `(timestamp, value)`: a table record stamped t sets its key's value from t on
  (a later record with the same key and timestamp replaces it); a tombstone (value None) is a
  version whose value is "absent". Versions are ordered by timestamp, not by arrival: a record
  stamped before the key's latest version goes into its history.
- The table's time is the newest timestamp it has seen, but never more than the default
  skew allowance (`max_future_ms`, 5 min) ahead of wall time: a record stamped years ahead
  (a wrong clock, or a hostile writer) is kept as a version at its own time but does not drag
  the horizon along, which would drop every key's history. Its horizon is that time less
  history_ms.
  A version whose successor starts at or before the horizon is dropped: nothing at or after
  the horizon can need it. The version current at the horizon stays, even a tombstone (a
  deleted key costs one entry), so a record that arrives late, stamped before it, changes
  nothing at or after the horizon: every answer there is the same whatever order the topic's
  partitions were read in, and however the reads were batched.
- `get(key)` is the value of the key's latest version (None if absent or a tombstone).
  `get(key, as_of=t)` is the value of its latest version stamped at or before t: exactly what
  the table held at t, whatever the replica has dropped, for any t at or after the horizon.
  For t before the horizon the answer is no longer known: `get` raises `TableHistoryExpired`,
  a bad record at stage "table", so the record whose hook asked is dead-lettered (or skipped,
  by the computation's `on_error`) naming the table and the times — never answered wrongly,
  never dropped unseen. A lookup of a plain global table (no history_ms) with `as_of` is a
  usage error naming the fix.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from framework.core.api import MIN_TIME
from framework.core.declarations import (
    DEFAULT_MAX_FUTURE_MS,
    PipelineError,
    check_name,
    check_stream,
)
from framework.errors import BadRecord, UsageError

__all__ = [
    "GlobalTable",
    "MemoryGlobalTable",
    "TableHistoryExpired",
    "answer",
    "declare_global_tables",
    "merged",
    "pruned",
]


@dataclass(frozen=True)
class GlobalTable:
    """A topic read whole by every task; `history_ms` keeps each key's earlier values for
    that span of record time (lookups `get(key, as_of=ts)`); None keeps the latest only."""

    topic: str
    history_ms: int | None = None


class TableHistoryExpired(BadRecord):
    """A lookup as of a time before the table's horizon (its newest record's time less its
    history_ms): what the key held then is no longer kept."""

    def __init__(self, reason: str) -> None:
        super().__init__("table", reason)


def declare_global_tables(
    where: str,
    global_tables: Mapping[str, str | GlobalTable] | None,
    tables: Mapping[str, str] | None = None,
) -> dict[str, GlobalTable]:
    """The global tables a computation declares (name -> topic or `GlobalTable`), checked:
    names as table names, topics as stream names, `history_ms` whole milliseconds > 0, and
    no name also among its co-partitioned `tables`. Raises `PipelineError` naming the fix."""
    declared: dict[str, GlobalTable] = {}
    for name, table in (global_tables or {}).items():
        check_name(f"{where}: global table", name)
        if isinstance(table, str):
            table = GlobalTable(table)
        if not isinstance(table, GlobalTable):
            raise PipelineError(
                f"{where}: global table {name!r} is {table!r}; give a topic name or "
                "GlobalTable(topic, history_ms=...)"
            )
        check_stream(table.topic)
        history = table.history_ms
        if history is not None and (type(history) is not int or history <= 0):
            raise PipelineError(
                f"{where}: global table {name!r} has history_ms={history!r}; give whole "
                "milliseconds > 0, or leave it out to keep only the latest values"
            )
        if name in (tables or {}):
            raise PipelineError(
                f"{where}: {name!r} is both a table and a global table: give them different names"
            )
        declared[name] = table
    return declared


# -- the versioned table's rules -------------------------------------------------------------


def merged(
    stored: Iterable[tuple[int, bool]], pending: Mapping[int, bool]
) -> Iterator[tuple[int, bool]]:
    """A key's versions `(timestamp, is_tombstone)` in timestamp order: those `stored` (in
    order) with the `pending` ones of a batch, which replace a stored one of the same time."""
    news = sorted(pending.items())
    i = 0
    for ts, tomb in stored:
        while i < len(news) and news[i][0] < ts:
            yield news[i]
            i += 1
        if i < len(news) and news[i][0] == ts:
            continue  # replaced: the pending one comes next
        yield ts, tomb
    yield from news[i:]


def pruned(versions: Iterable[tuple[int, bool]], horizon: int) -> list[int]:
    """The timestamps of a key's versions (`(timestamp, is_tombstone)`, in timestamp order)
    that no lookup at or after `horizon` can need: each one whose successor starts at or
    before the horizon. The last version at or before the horizon stays, a tombstone too: a
    record that comes late, stamped before it, then cannot bring back what it ended. Reads
    only as far as the first version kept."""
    drop: list[int] = []
    previous: int | None = None
    for ts, _ in versions:
        if previous is not None:
            if ts > horizon:
                break
            drop.append(previous)
        previous = ts
    return drop


def answer(name: str, key: str, found: tuple[int, Any] | None, as_of: int, horizon: int) -> Any:
    """What `get(key, as_of=...)` returns, given the key's latest version stamped at or before
    `as_of` (`found`: `(timestamp, value)`, value None for a tombstone; None if none is
    kept): its value, None when there is none; `TableHistoryExpired` before the horizon."""
    if as_of < horizon:
        raise TableHistoryExpired(
            f"global table {name!r}: key {key!r} looked up as of {as_of}, before the table's "
            f"history horizon {horizon} (its newest record's time less history_ms): raise "
            "history_ms to cover the oldest record time looked up"
        )
    return None if found is None else found[1]


def table_time(newest: int, timestamp: int, wall: int | None) -> int:
    """The table's time once a record stamped `timestamp` is in: the newest time seen, a
    record's time counted at most the skew allowance ahead of `wall` (ms; None: not held)."""
    if wall is not None:
        timestamp = min(timestamp, wall + DEFAULT_MAX_FUTURE_MS)
    return max(newest, timestamp)


def horizon_of(newest: int, history_ms: int | None) -> int:
    """The oldest time a lookup can be answered for: the newest record time less the span."""
    if newest == MIN_TIME or history_ms is None:
        return MIN_TIME
    return newest - history_ms


def check_as_of(name: str, history_ms: int | None, as_of: Any) -> None:
    """`as_of` is for a table with history, in whole milliseconds."""
    if history_ms is None:
        raise UsageError(
            f"global table {name!r} keeps no history, so get(key, as_of=...) cannot be "
            "answered: declare it GlobalTable(topic, history_ms=...)"
        )
    if type(as_of) is not int:
        raise TypeError(f"get(key, as_of=...) takes int milliseconds, got {type(as_of).__name__}")


class MemoryGlobalTable:
    """A global table in memory, under the rules above: the Harness's (values as given) and a
    backfill task's (raw values, decoded by `decode` on lookup). `put` applies one table
    record; `get(key, as_of=None)` and `in` read it as a hook does."""

    def __init__(self, name: str, history_ms: int | None, decode: Any = None) -> None:
        self.name = name
        self.history_ms = history_ms
        self.newest = MIN_TIME
        self._decode = decode
        self._versions: dict[str, list[tuple[int, Any]]] = {}  # key -> [(ts, value)] by ts

    @property
    def horizon(self) -> int:
        return horizon_of(self.newest, self.history_ms)

    def put(self, key: str, value: Any, timestamp: int, wall: int | None = None) -> None:
        """One table record: `value` (None: a tombstone) for `key` from `timestamp` on, put
        at wall time `wall` (None: the table's time is not held to it)."""
        if self.history_ms is None:  # the latest by arrival, as the topic's compaction keeps
            if value is None:
                self._versions.pop(key, None)
            else:
                self._versions[key] = [(timestamp, value)]
            return
        self.newest = table_time(self.newest, timestamp, wall)
        versions = self._versions.setdefault(key, [])
        at = bisect.bisect_left(versions, timestamp, key=lambda v: v[0])
        if at < len(versions) and versions[at][0] == timestamp:
            versions[at] = (timestamp, value)
        else:
            versions.insert(at, (timestamp, value))
        drop = len(pruned(((ts, v is None) for ts, v in versions), self.horizon))
        del versions[:drop]

    def get(self, key: str, default: Any = None, *, as_of: int | None = None) -> Any:
        versions = self._versions.get(key, ())
        if as_of is None:
            value = versions[-1][1] if versions else None
        else:
            check_as_of(self.name, self.history_ms, as_of)
            at = bisect.bisect_right(versions, as_of, key=lambda v: v[0])
            value = answer(self.name, key, versions[at - 1] if at else None, as_of, self.horizon)
        if value is None:
            return default
        return value if self._decode is None else self._decode(key, value)

    def __contains__(self, key: str) -> bool:
        versions = self._versions.get(key)
        return bool(versions) and versions[-1][1] is not None

    def __repr__(self) -> str:
        return f"MemoryGlobalTable({self.name!r})"
