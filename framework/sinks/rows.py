"""From records to table rows, and which errors of the database are a row's fault.

A record's value (a mapping) is a row: its fields are the columns (all of them, or those
`columns` names, or renamed by a `columns` mapping), the record id goes in `logwheel_id`;
a nested mapping or list is written as JSON (jsonb). A row the database refuses for what it
holds — a value of the wrong type, a broken constraint, a field that is no column — goes to the
dead-letter topic; anything else (the database down, the table missing, no privilege) is not
the row's fault and holds the partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import JsonbDumper

from framework.core.api import Record

ID_COLUMN = "logwheel_id"

ROW_STATES = ("22", "23")
"""SQLSTATE classes of errors a row's values cause: data exceptions (a type, a range, an
encoding) and integrity constraint violations (not null, unique, check, foreign key)."""
ROW_CODES = ("42703", "42804")
"""...and a field that is no column of the table (undefined_column), a value of a type the
column cannot take (datatype_mismatch)."""


def row_fault(error: BaseException) -> bool:
    """Whether `error`, met writing rows, is a row's own fault (so: dead-letter that row)."""
    if isinstance(error, psycopg.OperationalError):
        return False
    state = getattr(error, "sqlstate", None)
    if state is None:  # raised in psycopg before anything was sent: a value it cannot adapt
        return isinstance(error, psycopg.DataError | psycopg.ProgrammingError | TypeError)
    return state[:2] in ROW_STATES or state in ROW_CODES


def database_words(error: BaseException) -> str:
    """The database's message for `error`: its class, message and detail."""
    text = str(error).strip() or repr(error)
    return f"{type(error).__name__}: {text}"


class Rows:
    """Turns records into rows for one table, as `columns` says."""

    def __init__(self, columns: Sequence[str] | Mapping[str, str] | None) -> None:
        if columns is None:
            self.fields: dict[str, str] | None = None
        elif isinstance(columns, Mapping):
            self.fields = dict(columns)
        else:
            self.fields = {c: c for c in columns}

    def row(self, record: Record) -> dict[str, Any]:
        """The row of `record`; TypeError when its value is not a mapping."""
        value = record.value
        if type(value) is not dict and not isinstance(value, Mapping):
            raise TypeError(
                f"a sink writes mappings as rows, and this record's value is a "
                f"{type(value).__name__}"
            )
        if self.fields is None:
            row = dict(value)  # nested values are dumped as jsonb (`json_dumpers`)
        else:
            row = {column: value.get(f) for f, column in self.fields.items()}
        row[ID_COLUMN] = record.id
        return row


def column_list(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], bool]:
    """Every column any of `rows` has, in the order first met; and whether every row has
    every one of them (then `itemgetter(*columns)` reads a row's values)."""
    if not rows:
        return [], True
    first = rows[0]
    columns = dict.fromkeys(first)
    uniform = True
    keys = first.keys()
    for row in rows:
        if row.keys() != keys:
            columns.update(dict.fromkeys(row))
            uniform = False
    return list(columns), uniform


def json_dumpers(conn: psycopg.Connection) -> None:
    """Make `conn` write a mapping or a list as jsonb, as a nested value of a record is."""
    for kind in (dict, list):
        conn.adapters.register_dumper(kind, JsonbDumper)
