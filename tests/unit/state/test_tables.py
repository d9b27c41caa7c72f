"""Table replicas a computation joins against, with the table topics served from memory: a
task's replica is read to its end before its views are handed out, follows new records,
deletes on tombstones, and resumes from its stored position after a reopen."""

from __future__ import annotations

import pytest

from framework.core.api import Record
from framework.core.executor import Executor
from framework.serde.codecs import DecodeError
from framework.state.rocks import open_raw
from framework.state.tables import Tables
from jobs.enrich import build
from tests.unit.core.test_executor import _NoState, _Sink, _Timers
from tests.unit.state.fakes import FakeLog

PIPELINE = build("en", "en-")
SPEC = PIPELINE["enrich"]
TOPIC = SPEC.tables["profiles"]


def _profiles() -> FakeLog:
    log = FakeLog()
    log.write(TOPIC, 1, (b"ann", b'{"tier":"gold"}'), (b"bob", b'{"tier":"tin"}'))
    log.write(TOPIC, 0, (b"zed", b'{"tier":"gold"}'))
    return log


def test_add_reads_a_tasks_table_partition_to_its_end_and_the_view_answers_get_and_in(tmp_path):
    log = _profiles()
    tables = Tables(log, PIPELINE, SPEC, tmp_path)
    profiles = tables.add(1)["profiles"]
    assert profiles.get("ann") == {"tier": "gold"} and "bob" in profiles
    assert "zed" not in profiles and profiles.get("zed", "none") == "none"
    assert log.served == 2
    tables.close()


def test_a_tombstone_deletes_a_key_from_the_table(tmp_path):
    log = _profiles()
    log.write(TOPIC, 1, (b"bob", None))
    tables = Tables(log, PIPELINE, SPEC, tmp_path)
    profiles = tables.add(1)["profiles"]
    assert "bob" not in profiles and profiles.get("bob") is None and "ann" in profiles
    tables.close()


def test_step_applies_records_that_arrive_after_the_table_was_read(tmp_path):
    log = _profiles()
    tables = Tables(log, PIPELINE, SPEC, tmp_path)
    profiles = tables.add(1)["profiles"]
    log.write(TOPIC, 1, (b"cy", b'{"tier":"iron"}'), (b"ann", None))
    tables.step()
    assert profiles.get("cy") == {"tier": "iron"} and "ann" not in profiles
    tables.close()


def test_a_replica_reopened_after_remove_resumes_from_its_position_reading_only_the_tail(
    tmp_path,
):
    log = _profiles()
    tables = Tables(log, PIPELINE, SPEC, tmp_path)
    tables.add(1)
    tables.remove(1)
    assert log.positions == {}
    log.write(TOPIC, 1, (b"cy", b'{"tier":"iron"}'))
    served = log.served
    profiles = tables.add(1)["profiles"]
    assert log.served - served == 1
    assert profiles.get("cy") == {"tier": "iron"} and profiles.get("ann") == {"tier": "gold"}
    tables.close()


def test_a_replica_reopened_after_close_resumes_from_its_position_reading_only_the_tail(
    tmp_path,
):
    """The views are still held, so the reopen also shows close released the RocksDB lock."""
    log = _profiles()
    tables = Tables(log, PIPELINE, SPEC, tmp_path)
    held = tables.add(1)
    tables.close()
    assert log.closed and "profiles" in held
    log.write(TOPIC, 1, (b"bob", b'{"tier":"silver"}'))
    again = FakeLog(log.logs)
    reopened = Tables(again, PIPELINE, SPEC, tmp_path)
    profiles = reopened.add(1)["profiles"]
    assert again.served == 1 and profiles.get("bob") == {"tier": "silver"}
    assert "ann" in profiles
    reopened.close()


def test_remove_closes_the_rocksdb_handle_a_held_view_would_keep_open(tmp_path):
    """A task's hooks may still hold its views: only an explicit close releases the lock."""
    tables = Tables(_profiles(), PIPELINE, SPEC, tmp_path)
    views = tables.add(1)
    tables.remove(1)
    db = open_raw(tmp_path / "task-1" / "tables" / "profiles")
    assert db.get(b"ann") == b'{"tier":"gold"}'
    db.close()
    tables.close()
    del views


def test_a_value_that_cannot_be_decoded_dead_letters_the_record_whose_hook_reads_it(tmp_path):
    """Today's rule for tables, kept for every format: the reading hook's record goes to the
    dead-letter topic at stage "decode" with the table, key and reason; the rest flows."""
    log = _profiles()
    log.write(TOPIC, 1, (b"cy", b"\xffgarbage"))
    tables = Tables(log, PIPELINE, SPEC, tmp_path)
    views = tables.add(1)
    with pytest.raises(DecodeError, match=r"table 'profiles' \(en.profiles.changelog\), key 'cy'"):
        views["profiles"].get("cy")
    sink = _Sink()
    executor = Executor(SPEC, _NoState(), _Timers(), sink, tables=views)
    for user in ("cy", "ann"):
        executor.process(Record(user, {"id": user, "user": user, "url": "/"}, 0, "v", user))
    [(record, error, stage, _)] = sink.dead
    assert (record.key, stage) == ("cy", "decode") and "not UTF-8" in str(error)
    assert [(p[1], p[2]["name"]) for p in sink.produced] == [("ann", None)]
    tables.close()
