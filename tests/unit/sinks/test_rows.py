"""From records to table rows without a server: which fields become which columns, the record
id's column, the columns of a batch and whether its rows share them, nested values written as
jsonb, and which errors are a row's own fault (dead-lettered) rather than the database's (the
partition held). (The basic cases: tests/unit/sinks/test_postgres_config.py.)"""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace

import psycopg
import pytest
from psycopg.adapt import AdaptersMap, PyFormat, Transformer

from framework.core.api import Record, make_record
from framework.sinks.rows import (
    ID_COLUMN,
    Rows,
    column_list,
    database_words,
    json_dumpers,
    row_fault,
)


def _record(value) -> Record:
    return make_record("k", value, 0, "s", "id-1")


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.NotNullViolation("null in column"),
        psycopg.errors.UniqueViolation("duplicate key"),
        psycopg.errors.NumericValueOutOfRange("out of range"),
        psycopg.errors.CharacterNotInRepertoire("bad byte"),
        psycopg.errors.DatatypeMismatch("column is integer"),
    ],
)
def test_a_value_the_database_refuses_for_what_it_holds_is_the_rows_fault(error):
    assert row_fault(error)


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.SerializationFailure("could not serialize"),
        psycopg.errors.DeadlockDetected("deadlock"),
        psycopg.errors.InFailedSqlTransaction("aborted by an earlier error"),
        psycopg.errors.AdminShutdown("terminating connection"),
        psycopg.errors.SyntaxError("near x"),  # class 42, but not the row's doing
        psycopg.OperationalError("connection refused"),
        psycopg.InterfaceError("connection closed"),
        RuntimeError("a bug of the sink's"),
    ],
)
def test_an_error_of_the_database_or_the_sink_is_no_rows_fault(error):
    assert not row_fault(error)


@pytest.mark.parametrize(
    "error",
    [
        TypeError("cannot adapt"),
        psycopg.DataError("cannot dump"),
        psycopg.ProgrammingError("cannot adapt type 'set'"),
    ],
)
def test_a_value_refused_before_anything_was_sent_is_the_rows_fault(error):
    assert getattr(error, "sqlstate", None) is None
    assert row_fault(error)


def test_the_databases_words_name_the_errors_class_and_message_or_its_repr():
    assert database_words(psycopg.errors.UniqueViolation(" duplicate key \n")) == (
        "UniqueViolation: duplicate key"
    )
    assert database_words(psycopg.OperationalError()) == ("OperationalError: OperationalError()")


def test_any_mapping_is_a_row_copied_not_shared():
    value = {"a": 1}
    row = Rows(None).row(_record(value))
    row["a"] = 2
    assert value == {"a": 1}
    assert Rows(None).row(_record(MappingProxyType({"a": 1}))) == {"a": 1, ID_COLUMN: "id-1"}


def test_the_record_id_is_the_id_column_whatever_the_value_holds_under_its_name():
    assert Rows(None).row(_record({ID_COLUMN: "forged"}))[ID_COLUMN] == "id-1"
    assert Rows({"n": ID_COLUMN}).row(_record({"n": 3}))[ID_COLUMN] == "id-1"


def test_named_columns_take_only_their_fields_and_a_missing_one_is_null():
    rows = Rows({"a": "alpha", "b": "beta"})
    assert rows.row(_record({"a": 1, "c": 3})) == {"alpha": 1, "beta": None, ID_COLUMN: "id-1"}


def test_a_value_that_is_no_mapping_is_refused_naming_its_type():
    with pytest.raises(TypeError, match="this record's value is a str"):
        Rows(["a"]).row(_record("a,b"))


def test_the_columns_of_a_batch_are_every_rows_in_the_order_first_met():
    assert column_list([]) == ([], True)
    assert column_list([{"b": 1, "a": 2}, {"a": 3, "b": 4}]) == (["b", "a"], True)
    assert column_list([{"b": 1}, {"d": 2, "c": 3}, {"a": 4}]) == (["b", "d", "c", "a"], False)
    assert column_list([{"a": 1, "b": 2}, {"a": 3}]) == (["a", "b"], False)  # fewer


def test_a_mapping_and_a_list_are_written_as_jsonb():
    adapters = AdaptersMap(psycopg.adapters)
    json_dumpers(SimpleNamespace(adapters=adapters))
    jsonb = adapters.types["jsonb"].oid
    transformer = Transformer(adapters)
    for value, text in [({"a": [1]}, b'{"a": [1]}'), ([1, {"b": 2}], b'[1, {"b": 2}]')]:
        dumper = transformer.get_dumper(value, PyFormat.TEXT)
        assert (dumper.oid, bytes(dumper.dump(value))) == (jsonb, text)
