"""PostgresSink's arguments and rows, without a server: bad configuration refused in one
line, the DSN's password never shown, records as rows, which errors are a row's fault."""

from __future__ import annotations

import psycopg
import pytest

from framework.core.api import make_record
from framework.errors import ConfigurationError
from framework.sinks import PostgresSink
from framework.sinks.postgres import masked
from framework.sinks.rows import Rows, column_list, row_fault

DSN = "postgresql://app:s3cret@127.0.0.1:5432/shop"


def test_the_password_is_never_in_the_sinks_repr():
    sink = PostgresSink(DSN, "orders")
    assert "s3cret" not in repr(sink) and "***" in repr(sink)
    assert "s3cret" not in masked("host=h password=s3cret dbname=d")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"mode": "upsert"}, "needs key="),
        ({"key": ("id",), "mode": "append"}, "is for upserts"),
        ({"mode": "merge"}, "use one of"),
        ({"batch": 0}, "batch=0"),
    ],
)
def test_bad_arguments_fail_in_one_line_naming_the_fix(kwargs, words):
    with pytest.raises(ConfigurationError, match=words):
        PostgresSink(DSN, "orders", **kwargs)


def test_a_key_makes_an_upsert():
    assert PostgresSink(DSN, "orders", key="id").mode == "upsert"


def test_a_value_becomes_a_row_with_its_id_and_nested_values_as_json():
    record = make_record("k", {"a": 1, "b": {"c": [2]}}, 0, "s", "id-1")
    row = Rows(None).row(record)
    assert row == {"a": 1, "b": {"c": [2]}, "logwheel_id": "id-1"}
    assert Rows({"a": "alpha"}).row(record) == {"alpha": 1, "logwheel_id": "id-1"}
    assert Rows(["a", "z"]).row(record) == {"a": 1, "z": None, "logwheel_id": "id-1"}
    with pytest.raises(TypeError, match="mappings"):
        Rows(None).row(make_record("k", [1], 0, "s", "id-2"))
    assert column_list([{"a": 1}, {"b": 2, "a": 3}]) == (["a", "b"], False)
    assert column_list([{"a": 1, "b": 2}, {"b": 2, "a": 3}]) == (["a", "b"], True)


def test_only_what_a_row_holds_is_its_fault():
    assert row_fault(psycopg.errors.CheckViolation("no"))
    assert row_fault(psycopg.errors.InvalidTextRepresentation("no"))
    assert row_fault(psycopg.errors.UndefinedColumn("no"))
    assert not row_fault(psycopg.OperationalError("connection refused"))
    assert not row_fault(psycopg.errors.UndefinedTable("no table"))
    assert not row_fault(psycopg.errors.InsufficientPrivilege("no"))
