"""PostgresSink against the test PostgreSQL server, without Kafka: what each call of the
protocol does to the database — offsets and epochs, refused rows with the database's words,
upserts where the last record of a key wins, nested values as jsonb, a fenced writer, and the
configuration errors that stop a start in one line (the password never in them)."""

from __future__ import annotations

import os

import psycopg
import pytest

from framework.core.api import make_record
from framework.errors import ConfigurationError
from framework.sinks import Fenced, PostgresSink, Refused, Unavailable
from tests.support_postgres import PASSWORD


@pytest.fixture
def table(postgres) -> str:
    name = f"t_{os.urandom(5).hex()}"
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {name} (k text UNIQUE, n integer CHECK (n >= 0), doc jsonb, "
            "logwheel_id text)"
        )
    return name


def _records(*values: dict, first: int = 0) -> list:
    return [make_record("key", v, 0, "s", f"s/0/{first + i}") for i, v in enumerate(values)]


def _rows(dsn: str, table: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT k, n, doc, logwheel_id FROM {table} ORDER BY k").fetchall()


def test_a_batch_and_its_offset_commit_together_and_open_resumes_from_them(postgres, table):
    sink = PostgresSink(postgres.dsn(), table)
    sink.start(f"p.{table}")
    assert sink.open("s", 0) is None  # nothing stored yet
    sink.write("s", 0, _records({"k": "a", "n": 1, "doc": {"x": [1]}}, {"k": "b", "n": 2}), 2)
    again = PostgresSink(postgres.dsn(), table)
    again.start(f"p.{table}")
    assert again.open("s", 0) == 2
    assert _rows(postgres.dsn(), table) == [
        ("a", 1, {"x": [1]}, "s/0/0"),
        ("b", 2, None, "s/0/1"),
    ]
    with pytest.raises(Fenced):  # the first one was replaced: it commits nothing
        sink.write("s", 0, _records({"k": "c", "n": 3}, first=2), 3)
    assert len(_rows(postgres.dsn(), table)) == 2
    with psycopg.connect(postgres.dsn()) as conn:
        assert conn.execute(
            "SELECT next_offset, epoch FROM logwheel_sink_offsets WHERE sink = %s",
            (f"p.{table}",),
        ).fetchone() == (2, 2)
    sink.close()
    again.close()


def test_refused_rows_are_named_with_the_databases_words_and_nothing_is_written(postgres, table):
    sink = PostgresSink(postgres.dsn(), table)
    sink.open("s", 0)
    batch = _records({"k": "a", "n": 1}, {"k": "b", "n": -1}, {"k": "c", "n": "many"}, {"k": "a"})
    with pytest.raises(Refused) as refused:
        sink.write("s", 0, batch, 4)
    words = dict(refused.value.rows)
    assert set(words) == {1, 2, 3}
    assert "CheckViolation" in words[1] and "violates check constraint" in words[1]
    assert "invalid input syntax for type integer" in words[2]
    assert "UniqueViolation" in words[3]
    assert _rows(postgres.dsn(), table) == []
    sink.write("s", 0, [batch[0]], 4)  # the runtime writes the rest again
    assert [r[0] for r in _rows(postgres.dsn(), table)] == ["a"]
    sink.close()


def test_an_upsert_keeps_the_last_value_of_each_key(postgres, table):
    sink = PostgresSink(postgres.dsn(), table, key=("k",))
    sink.open("s", 1)
    sink.write("s", 1, _records({"k": "a", "n": 1}, {"k": "b", "n": 5}, {"k": "a", "n": 2}), 3)
    sink.write("s", 1, _records({"k": "b", "n": 6}, first=3), 4)
    assert [(k, n, i) for k, n, _, i in _rows(postgres.dsn(), table)] == [
        ("a", 2, "s/0/2"),
        ("b", 6, "s/0/3"),
    ]
    sink.close()


def test_bad_configuration_stops_the_start_in_one_line_without_the_password(postgres, table):
    with pytest.raises(ConfigurationError, match="does not exist: create it") as missing:
        PostgresSink(postgres.dsn(), "no_such_table").open("s", 0)
    with pytest.raises(ConfigurationError, match=rf"ALTER TABLE {table} ADD UNIQUE \(n\)") as key:
        PostgresSink(postgres.dsn(), table, key=("n",)).open("s", 0)
    wrong = postgres.dsn().replace(PASSWORD, PASSWORD + "x")
    with pytest.raises(Unavailable, match="password authentication failed") as refused:
        PostgresSink(wrong, table).open("s", 0)
    for error in (missing, key, refused):
        assert PASSWORD not in str(error.value) and "\n" not in str(error.value)


def test_a_nested_use_of_the_shared_server_leaves_it_running(postgres):
    """A benchmark run in process inside a test that holds the fixture (bench/sink.py's quick
    run) takes and gives back a lease of its own, not the test's: the server stays up."""
    from tests.support_postgres import shared_postgres

    with shared_postgres() as nested:
        assert nested.port == postgres.port
    assert postgres.running()
