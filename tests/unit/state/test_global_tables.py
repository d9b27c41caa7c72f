"""A process's global table replicas in RocksDB, with the topic served from memory: every
partition read to its end before the first task's views are handed out, the versioned layout
answering as the in-memory table of the Harness and the backfill does (whatever the batches),
a reopened replica reading only the tail, and bad table records counted, never applied."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import GlobalTable, Pipeline
from framework.core.global_tables import MemoryGlobalTable, TableHistoryExpired
from framework.core.metrics import GLOBAL_TABLE_SKIPPED
from framework.serde.codecs import DecodeError
from framework.state.global_tables import GlobalReplica, GlobalTables
from tests.unit.state.fakes import FakeLog

TOPIC = "fx.rates"
PIPELINE = Pipeline("gt").source("orders")
PIPELINE.computation(
    "convert",
    object,
    inputs={"orders": None},
    global_tables={"rates": GlobalTable(TOPIC, history_ms=50), "names": "fx.names"},
)
SPEC = PIPELINE["convert"]
COUNTS = {TOPIC: 2, "fx.names": 1}


def _decode(raw: bytes) -> object:
    return json.loads(raw)


class _Msg:
    def __init__(self, key: bytes | None, value: bytes | None, ts: int, partition: int) -> None:
        self._key, self._value, self._ts, self._p = key, value, ts, partition

    def key(self):
        return self._key

    def value(self):
        return self._value

    def timestamp(self):
        return 1, self._ts

    def partition(self):
        return self._p


records = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(0, 200), st.one_of(st.none(), st.integers())),
    max_size=30,
)


@settings(max_examples=20, deadline=None)
@given(records, st.lists(st.integers(1, 5), min_size=1, max_size=10))
def test_the_rocksdb_replica_answers_as_the_memory_table_whatever_the_batches(records, cuts):
    memory = MemoryGlobalTable("rates", 50)
    with tempfile.TemporaryDirectory() as tmp:
        replica = GlobalReplica("c", "rates", GlobalTable(TOPIC, 50), Path(tmp), _decode)
        msgs = [
            _Msg(k.encode(), None if v is None else json.dumps(v).encode(), ts, 0)
            for k, ts, v in records
        ]
        start, i = 0, 0
        while start < len(msgs):
            batch = msgs[start : start + cuts[i % len(cuts)]]
            replica.apply(batch, {0: start + len(batch)})
            start, i = start + len(batch), i + 1
        for k, ts, v in records:
            memory.put(k, v, ts)
        assert replica.horizon == memory.horizon
        for key in "abcd":
            assert replica.view.get(key) == memory.get(key) and (key in replica.view) == (
                key in memory
            )
            for as_of in range(-5, 210, 7):
                try:
                    expected = memory.get(key, as_of=as_of)
                except TableHistoryExpired:
                    with pytest.raises(TableHistoryExpired):
                        replica.view.get(key, as_of=as_of)
                else:
                    assert replica.view.get(key, as_of=as_of) == expected, (key, as_of)
        replica.close()


def _log() -> FakeLog:
    log = FakeLog()
    log.write(TOPIC, 0, (b"eur", b'{"rate":1.1}', 100), (b"eur", b'{"rate":1.2}', 200))
    log.write(TOPIC, 1, (b"usd", b'{"rate":1.0}', 150))
    log.write("fx.names", 0, (b"eur", b'"euro"', 0))
    return log


def test_the_first_task_gets_every_partition_of_every_table_read_to_its_end(tmp_path):
    log = _log()
    tables = GlobalTables(log, PIPELINE, SPEC, tmp_path, COUNTS)
    views = tables.add(3)
    assert log.served == 4
    assert views["rates"].get("eur") == {"rate": 1.2} and "usd" in views["rates"]
    assert views["rates"].get("eur", as_of=150) == {"rate": 1.1}
    assert views["names"].get("eur") == "euro"
    assert tables.add(0)["rates"] is views["rates"]  # one replica serves every task
    tables.close()


def test_sync_reads_what_was_written_since_and_step_what_has_arrived(tmp_path):
    log = _log()
    tables = GlobalTables(log, PIPELINE, SPEC, tmp_path, COUNTS)
    rates = tables.add(0)["rates"]
    log.write(TOPIC, 1, (b"gbp", b'{"rate":0.8}', 210))
    tables.sync([0])
    assert rates.get("gbp") == {"rate": 0.8}
    log.write(TOPIC, 0, (b"eur", None, 220))
    tables.step()
    assert "eur" not in rates and rates.get("eur", as_of=219) == {"rate": 1.2}
    tables.close()


def test_a_reopened_replica_reads_only_what_was_written_since(tmp_path):
    log = _log()
    first = GlobalTables(log, PIPELINE, SPEC, tmp_path, COUNTS)
    first.add(0)
    first.close()
    log.write(TOPIC, 1, (b"usd", b'{"rate":0.9}', 300))
    again = FakeLog(log.logs)
    tables = GlobalTables(again, PIPELINE, SPEC, tmp_path, COUNTS)
    rates = tables.add(0)["rates"]
    assert again.served == 1 and tables.replicas["rates"].read == 1
    assert rates.get("usd") == {"rate": 0.9} and rates.get("eur", as_of=260) == {"rate": 1.2}
    tables.close()


def test_bad_table_records_are_counted_or_dead_letter_the_reading_record_never_applied(tmp_path):
    """No key: counted and not applied; an undecodable value is kept and fails the hook that
    reads it (its record dead-lettered, as for any table)."""
    log = _log()
    skipped = GLOBAL_TABLE_SKIPPED.labels("convert", "rates", "no key")
    before = skipped._value.get()
    log.write(TOPIC, 0, (None, b'{"rate":9}', 230), (b"chf", b"\xffgarbage", 230))
    tables = GlobalTables(log, PIPELINE, SPEC, tmp_path, COUNTS)
    rates = tables.add(0)["rates"]
    assert skipped._value.get() == before + 1
    assert rates.get("usd") == {"rate": 1.0}
    with pytest.raises(DecodeError, match=r"table 'rates' \(fx.rates\), key 'chf'"):
        rates.get("chf")
    tables.close()


def test_a_record_stamped_far_ahead_of_wall_time_does_not_drag_the_horizon(tmp_path):
    from framework.core.clock import now_ms

    replica = GlobalReplica("c", "rates", GlobalTable(TOPIC, 50), tmp_path, _decode)
    replica.apply([_Msg(b"a", b"1", 10**15, 0)], {0: 1})
    assert replica.horizon <= now_ms() + 300_000 and replica.view.get("a", as_of=10**15) == 1
    replica.close()


def test_a_task_gets_its_co_partitioned_tables_and_the_global_ones_together(tmp_path):
    from framework.state.global_tables import table_set

    pipeline = Pipeline("both").source("orders")
    pipeline.computation("c", object, inputs={"orders": None}, tables={"users": "users"},
                         global_tables={"rates": GlobalTable(TOPIC, history_ms=50)})  # fmt: skip
    log = _log()
    log.write("users", 1, (b"ann", b'{"tier":"gold"}'))
    tables = table_set(lambda: log, pipeline, pipeline["c"], tmp_path, COUNTS)
    views = tables.add(1)
    assert views["users"].get("ann") == {"tier": "gold"} and "usd" in views["rates"]
    tables.remove(1)
    assert "rates" in tables.add(0)  # the global replica stayed open for the other tasks
    tables.close()
    plain = Pipeline("none").source("orders")
    plain.computation("c", object, inputs={"orders": None})
    assert table_set(lambda: log, plain, plain["c"], tmp_path, COUNTS) is None
