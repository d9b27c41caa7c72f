"""PostgreSQL as a sink, exactly once, on psycopg 3.

Each batch of a partition is one transaction: the rows go in (COPY when appending; INSERT ...
ON CONFLICT DO UPDATE through psycopg's pipelined `executemany` when upserting, the last record
of a key in the batch winning), then the partition's row of
`logwheel_sink_offsets(sink, topic, partition, next_offset, epoch)` is moved to the batch's
next offset and the transaction committed, in one round trip — the move only if the row's
epoch is still the one this instance's `open` set, else the transaction fails before its
COMMIT: a replaced instance (a zombie) commits nothing. Three round trips a batch (BEGIN, COPY,
move-and-COMMIT), as many as a hand-written loop's. `open` bumps the epoch and reads the
next offset in one statement, so the database, not the consumer group, says where to resume.

A batch the database refuses is written again row by row inside one transaction (each in a
savepoint) to learn which rows it refuses and why, then rolled back: those rows go to the
dead-letter topic (`Refused`), the rest are written again without them. A connection lost or
refused is `Unavailable`: the runtime holds the partition and retries with backoff.
The DSN's password is never printed: `repr` and every message show it masked.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from framework.core.api import Record
from framework.errors import ConfigurationError, LogwheelError
from framework.sinks.protocol import DEFAULT_BATCH, Fenced, Refused, Unavailable
from framework.sinks.rows import (
    ID_COLUMN,
    Rows,
    column_list,
    database_words,
    json_dumpers,
    row_fault,
)
from framework.sinks.stops import stop_at

log = logging.getLogger(__name__)

MODES = ("append", "upsert")
OFFSETS_TABLE = "logwheel_sink_offsets"
CONNECT_TIMEOUT_S = 5
IDLE_IN_TRANSACTION_MS = 30_000
"""A writer stopped inside a transaction (SIGSTOP) holds its partition's offsets row: the
server ends its session after this long, so the partition's next owner can go on."""

_OFFSETS_DDL = f"""CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (
    sink text NOT NULL, topic text NOT NULL, partition integer NOT NULL,
    next_offset bigint, epoch bigint NOT NULL,
    PRIMARY KEY (sink, topic, partition))"""
_OPEN = f"""INSERT INTO {OFFSETS_TABLE} AS o (sink, topic, partition, next_offset, epoch)
    VALUES (%s, %s, %s, NULL, 1)
    ON CONFLICT (sink, topic, partition) DO UPDATE SET epoch = o.epoch + 1
    RETURNING next_offset, epoch"""
_ADVANCE_AND_COMMIT = sql.SQL(
    f"""WITH moved AS (UPDATE {OFFSETS_TABLE} SET next_offset = {{}}
        WHERE sink = {{}} AND topic = {{}} AND partition = {{}} AND epoch = {{}} RETURNING 1)
    SELECT 1 / count(*) FROM moved; COMMIT"""
)


class _Rollback(LogwheelError):
    """Ends the transaction of a refusal search (its writes were only a test)."""


def masked(dsn: str) -> str:
    """`dsn` with its password (if any) replaced by ***."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<an unparsable DSN>"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo(**params)


class PostgresSink:
    """Writes records as rows of `table`, exactly once (the module's docstring says how).

    `key`: the columns to upsert on (`mode="upsert"`, the default when a key is given; the
    table needs a unique constraint or index on exactly them); None appends (`mode="append"`).
    `columns`: which fields to write (a list; a mapping renames field -> column); None: every
    field of each value. `batch`: records per transaction at most."""

    def __init__(
        self,
        dsn: str,
        table: str,
        key: Sequence[str] | None = None,
        mode: str | None = None,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        self._dsn = dsn
        self.where = masked(dsn)
        mode = mode or ("upsert" if key else "append")
        if mode not in MODES:
            raise ConfigurationError(f"PostgresSink: mode={mode!r}; use one of {MODES}")
        if isinstance(key, str):
            key = (key,)
        if mode == "upsert" and not key:
            raise ConfigurationError(
                "PostgresSink: mode='upsert' needs key=('column', ...), the columns to upsert on"
            )
        if mode == "append" and key:
            raise ConfigurationError(
                f"PostgresSink: key={tuple(key)!r} is for upserts: give mode='upsert' or no key"
            )
        if type(batch) is not int or batch < 1:
            raise ConfigurationError(f"PostgresSink: batch={batch!r}; give a number of rows >= 1")
        self.table, self.key, self.mode, self.batch = table, tuple(key or ()), mode, batch
        self._table = sql.Identifier(*table.split("."))
        self._rows = Rows(columns)
        self.name = "logwheel"  # the offsets table's `sink`; `start` gives the real one
        self._conn: psycopg.Connection | None = None
        self._checked = False
        self._epochs: dict[tuple[str, int], int] = {}

    def __repr__(self) -> str:
        return f"PostgresSink({self.where!r}, table={self.table!r}, mode={self.mode!r})"

    # -- the protocol ---------------------------------------------------------------------

    def start(self, name: str) -> None:
        self.name = name

    def open(self, topic: str, partition: int) -> int | None:
        conn = self._connection()
        try:
            with conn.transaction():
                next_offset, epoch = conn.execute(_OPEN, (self.name, topic, partition)).fetchone()
        except psycopg.Error as error:
            raise self._unavailable(error) from None
        self._epochs[(topic, partition)] = epoch
        return next_offset

    def write(
        self, topic: str, partition: int, records: Sequence[Record], next_offset: int
    ) -> None:
        epoch = self._epochs.get((topic, partition))
        if epoch is None:
            raise Fenced(f"{topic}[{partition}] is not open here")
        rows, refused = [], []
        for i, record in enumerate(records):
            try:
                rows.append(self._rows.row(record))
            except TypeError as error:
                refused.append((i, database_words(error)))
        if refused:
            raise Refused(refused)
        if self.mode == "upsert":
            rows = self._last_per_key(rows)
        conn = self._connection()
        try:
            conn.execute("BEGIN")
            self._insert(conn, [r for _, r in rows] if self.mode == "upsert" else rows)
            stop_at("in-transaction")
            self._advance_and_commit(conn, topic, partition, next_offset, epoch)
        except Exception as error:
            self._roll_back(conn)
            if isinstance(error, Fenced):
                raise
            if not row_fault(error):
                raise self._unavailable(error) from None
            indexed = rows if self.mode == "upsert" else list(enumerate(rows))
            raise self._refusals(conn, indexed, error) from None

    def close(self) -> None:
        self._epochs.clear()
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(psycopg.Error):
                conn.close()

    # -- inside -------------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection:
        """The connection, made (and the tables checked, once) if there is none."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            json_dumpers(conn)
            conn.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
            if not self._checked:
                self._check(conn)
        except psycopg.Error as error:
            raise self._unavailable(error) from None
        self._conn = conn
        return conn

    def _check(self, conn: psycopg.Connection) -> None:
        """At start: the offsets table made, the table there, an upsert's key unique in it —
        else a one-line `ConfigurationError` naming the fix."""
        try:
            with conn.transaction():
                conn.execute(_OFFSETS_DDL)
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            pass  # another sink made it at the same moment
        if conn.execute("SELECT to_regclass(%s)", (self.table,)).fetchone()[0] is None:
            raise ConfigurationError(
                f"{self!r}: table {self.table!r} does not exist: create it with a column per "
                f"field of the records and {ID_COLUMN} text"
            )
        if self.mode == "upsert":
            probe = sql.SQL("EXPLAIN INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO NOTHING")
            keys = sql.SQL(", ").join(map(sql.Identifier, self.key))
            nulls = sql.SQL(", ").join(sql.NULL for _ in self.key)
            try:
                conn.execute(probe.format(self._table, keys, nulls, keys))
            except (psycopg.errors.InvalidColumnReference, psycopg.errors.UndefinedColumn) as e:
                raise ConfigurationError(
                    f"{self!r}: upserting on {self.key} needs a unique constraint on exactly "
                    f"those columns of {self.table!r} ({e.diag.message_primary}): add one, "
                    f"e.g. ALTER TABLE {self.table} ADD UNIQUE ({', '.join(self.key)})"
                ) from None
        self._checked = True

    def _advance_and_commit(
        self, conn: psycopg.Connection, topic: str, partition: int, next_offset: int, epoch: int
    ) -> None:
        """Move the partition's offset and commit, in one round trip; `Fenced` (nothing
        committed) if another `open` bumped the epoch since ours: the UPDATE then moves no row
        and the division by that count fails the transaction before its COMMIT. The UPDATE
        takes the row's lock, so of two writers of a partition only the one whose epoch is
        current gets past it."""
        statement = _ADVANCE_AND_COMMIT.format(
            *map(sql.Literal, (next_offset, self.name, topic, partition, epoch))
        )
        try:
            conn.execute(statement)
        except psycopg.errors.DivisionByZero:
            self._epochs.pop((topic, partition), None)
            raise Fenced(
                f"{self.name}: {topic}[{partition}] was opened by another instance"
            ) from None

    def _roll_back(self, conn: psycopg.Connection) -> None:
        """End a failed transaction, if the connection still has one."""
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    def _insert(self, conn: psycopg.Connection, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        columns, uniform = column_list(rows)
        names = sql.SQL(", ").join(map(sql.Identifier, columns))
        with conn.cursor() as cur:
            if self.mode == "append":
                copy = sql.SQL("COPY {} ({}) FROM STDIN").format(self._table, names)
                with cur.copy(copy) as out:
                    if uniform:
                        values = itemgetter(*columns)
                        for row in rows:
                            out.write_row(values(row))
                    else:
                        for row in rows:
                            out.write_row([row.get(c) for c in columns])
                return
            updates = [c for c in columns if c not in self.key]
            statement = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}")
            statement = statement.format(
                self._table,
                names,
                sql.SQL(", ").join(sql.Placeholder() * len(columns)),
                sql.SQL(", ").join(map(sql.Identifier, self.key)),
                sql.SQL(", ").join(
                    sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
                    for c in updates
                ),
            )
            cur.executemany(statement, [[row.get(c) for c in columns] for row in rows])

    def _last_per_key(self, rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
        """(index in the batch, row) of the last row of each key: one statement may not
        update a row twice, and the last value is the final one anyway."""
        last: dict[tuple, tuple[int, dict[str, Any]]] = {}
        for i, row in enumerate(rows):
            ident = tuple(_hashable(row.get(k)) for k in self.key)
            last.pop(ident, None)  # keep offset order among the survivors
            last[ident] = (i, row)
        return list(last.values())

    def _refusals(
        self, conn: psycopg.Connection, rows: list[tuple[int, dict[str, Any]]], first: Exception
    ) -> Exception:
        """Which of `rows` the database refuses, each written in a savepoint of a transaction
        rolled back afterwards: `Refused` with them, else `Unavailable` with `first`."""
        refused = []
        try:
            with conn.transaction():
                for i, row in rows:
                    try:
                        with conn.transaction():
                            self._insert(conn, [row])
                    except Exception as error:
                        if not row_fault(error):
                            raise
                        refused.append((i, database_words(error)))
                raise _Rollback
        except _Rollback:
            pass
        except Exception as error:
            return self._unavailable(error)
        return Refused(refused) if refused else self._unavailable(first)

    def _unavailable(self, error: BaseException) -> Unavailable:
        """`error` as `Unavailable`, the connection dropped (a new one is made next time)
        unless it is known sound; the epochs stay: the offsets rows hold them."""
        if self._conn is not None and (
            self._conn.closed or self._conn.broken or isinstance(error, psycopg.OperationalError)
        ):
            conn, self._conn = self._conn, None
            with contextlib.suppress(psycopg.Error):
                conn.close()
        text = database_words(error).replace(self._dsn, self.where)
        return Unavailable(f"{self.where}: {text}")


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, dict | list) else value
