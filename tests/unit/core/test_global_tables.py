"""The versioned table's rules (framework/core/global_tables.py), against a brute-force
reference that keeps every version: any order of table records, any lookup time at or after
the horizon answers exactly what the key held then; before it, a bad record at stage "table";
and the declaration's checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import GlobalTable, Pipeline, PipelineError
from framework.core.api import MIN_TIME
from framework.core.declarations import DEFAULT_MAX_FUTURE_MS
from framework.core.global_tables import (
    MemoryGlobalTable,
    TableHistoryExpired,
    merged,
    pruned,
)
from framework.errors import UsageError

KEYS = ("eur", "usd", "gbp")
HISTORY = 50

# (key, timestamp, value or None for a tombstone), in arrival order
table_records = st.lists(
    st.tuples(st.sampled_from(KEYS), st.integers(0, 200), st.one_of(st.none(), st.integers())),
    max_size=40,
)


def reference(records: list, key: str, as_of: int | None) -> object:
    """What the key held at `as_of` (None: its latest version), from every record kept."""
    versions: dict[int, object] = {}
    for k, ts, value in records:
        if k == key:
            versions[ts] = value  # a later record of the same time replaces the earlier one
    times = [ts for ts in versions if as_of is None or ts <= as_of]
    return versions[max(times)] if times else None


@settings(max_examples=150, deadline=None)
@given(table_records, st.integers(-10, 260))
def test_a_lookup_at_or_after_the_horizon_answers_what_the_key_held_then(records, as_of):
    table = MemoryGlobalTable("rates", HISTORY)
    for key, ts, value in records:
        table.put(key, value, ts)
    horizon = max((ts for _, ts, _ in records), default=MIN_TIME + HISTORY) - HISTORY
    for key in KEYS:
        assert table.get(key) == reference(records, key, None)
        assert (key in table) == (reference(records, key, None) is not None)
        if as_of >= horizon:
            assert table.get(key, as_of=as_of) == reference(records, key, as_of), key
        else:
            with pytest.raises(TableHistoryExpired, match="before the table's history horizon"):
                table.get(key, as_of=as_of)


@settings(max_examples=100, deadline=None)
@given(table_records)
def test_a_key_keeps_no_version_that_no_lookup_after_the_horizon_needs(records):
    """At most one version at or before the horizon (none if it is a tombstone) in a key
    just put."""
    table = MemoryGlobalTable("rates", HISTORY)
    for key, ts, value in records:
        table.put(key, value, ts)
        versions = table._versions.get(key, [])
        assert len([t for t, _ in versions if t <= table.horizon]) <= 1, (key, versions)
        assert versions == sorted(versions, key=lambda v: v[0])


@settings(max_examples=80, deadline=None)
@given(table_records, st.randoms())
def test_answers_at_or_after_the_horizon_do_not_depend_on_the_order_records_came_in(records, rng):
    """Partitions of the topic are read in any interleaving (and run and backfill read them
    differently): a late record, stamped before a tombstone whose history was dropped, must
    not bring the key back."""
    shuffled = records[:]
    rng.shuffle(shuffled)
    tables = [MemoryGlobalTable("rates", HISTORY) for _ in range(2)]
    for table, order in zip(tables, (records, shuffled), strict=True):
        for key, ts, value in order:
            table.put(key, value, ts)
    same_time = {(k, ts) for k, ts, _ in records}
    if len(same_time) < len(records):
        return  # two records of one key and time: the later by arrival wins, order matters
    for key in KEYS:
        for as_of in range(max(tables[0].horizon, -10), 210, 5):
            assert tables[0].get(key, as_of=as_of) == tables[1].get(key, as_of=as_of)


def test_a_late_record_does_not_bring_back_a_key_deleted_after_it():
    table = MemoryGlobalTable("rates", HISTORY)
    table.put("usd", 1, 5)
    table.put("usd", None, 10)
    table.put("eur", 1, 100)  # horizon 50: the tombstone of usd is all its history kept
    table.put("usd", 7, 8)
    assert table.get("usd") is None and table.get("usd", as_of=60) is None


def test_pruned_drops_each_version_whose_successor_starts_by_the_horizon():
    assert pruned([(1, False), (5, False), (9, False)], horizon=5) == [1]
    assert pruned([(1, False), (5, False), (9, False)], horizon=9) == [1, 5]
    assert pruned([(1, False), (5, True)], horizon=6) == [1]  # the tombstone stays
    assert pruned([(1, False), (5, True)], horizon=4) == []
    assert pruned([], horizon=4) == []


def test_pruned_reads_no_further_than_the_first_version_it_keeps():
    def versions():
        yield (1, False)
        yield (8, False)
        raise AssertionError("read past the first version kept")

    assert pruned(versions(), horizon=5) == []


def test_merged_puts_a_batchs_versions_among_the_stored_ones_replacing_the_same_time():
    stored = [(1, False), (4, False), (9, True)]
    assert list(merged(stored, {4: True, 0: False, 12: False})) == [
        (0, False),
        (1, False),
        (4, True),
        (9, True),
        (12, False),
    ]


def test_a_tombstone_hides_the_key_from_its_time_on_and_not_before():
    table = MemoryGlobalTable("rates", 1_000)
    table.put("eur", {"rate": 1.1}, 100)
    table.put("eur", None, 200)
    assert table.get("eur") is None and "eur" not in table
    assert table.get("eur", as_of=150) == {"rate": 1.1}
    assert table.get("eur", "none", as_of=200) == "none"


def test_a_table_without_history_keeps_the_latest_by_arrival_and_refuses_as_of():
    table = MemoryGlobalTable("catalogue", None)
    table.put("p1", {"v": 2}, 200)
    table.put("p1", {"v": 1}, 100)  # arrived later: the latest, whatever its time
    assert table.get("p1") == {"v": 1}
    with pytest.raises(UsageError, match=r"declare it GlobalTable\(topic, history_ms=...\)"):
        table.get("p1", as_of=100)
    table.put("p1", None, 300)
    assert "p1" not in table


def test_as_of_takes_whole_milliseconds():
    with pytest.raises(TypeError, match="int milliseconds"):
        MemoryGlobalTable("rates", 10).get("eur", as_of=1.5)


# -- declaring --------------------------------------------------------------------------------


def declare(**kwargs) -> Pipeline:
    pipeline = Pipeline("p").source("orders")
    return pipeline.computation("c", object, inputs={"orders": None}, **kwargs)


def test_a_global_table_is_declared_by_topic_or_as_a_GlobalTable_on_computation_and_windowed():
    from framework import windows

    pipeline = declare(global_tables={"rates": GlobalTable("fx.rates", 86_400_000), "cat": "c"})
    assert pipeline["c"].global_tables == {
        "rates": GlobalTable("fx.rates", 86_400_000),
        "cat": GlobalTable("c"),
    }
    assert pipeline["c"].table_topics == ["fx.rates", "c"]
    window, count = windows.Tumbling(10), windows.Count()
    pipeline.windowed("w", inputs={"orders": None}, window=window, aggregate=count, output="o",
                      global_tables={"r": "fx.rates"})  # fmt: skip
    assert pipeline["w"].global_tables == {"r": GlobalTable("fx.rates")}


@pytest.mark.parametrize(
    ("global_tables", "tables", "message"),
    [
        ({"rates": GlobalTable("fx.rates", 0)}, None, "history_ms=0; give whole milliseconds"),
        ({"rates": GlobalTable("fx.rates", 1.5)}, None, "history_ms=1.5"),
        ({"rates": 42}, None, r"give a topic name or GlobalTable\(topic, history_ms=...\)"),
        ({"Rates": "fx.rates"}, None, "global table name 'Rates' must match"),
        ({"rates": "fx rates"}, None, "is not a valid Kafka topic name"),
        ({"rates": "fx.rates"}, {"rates": "x"}, "both a table and a global table"),
    ],
)
def test_a_bad_global_table_declaration_fails_naming_the_fix(global_tables, tables, message):
    with pytest.raises(PipelineError, match=message):
        declare(global_tables=global_tables, tables=tables)


def test_a_record_stamped_far_ahead_of_wall_time_keeps_its_version_but_not_the_horizon():
    """A wrong clock or a hostile writer must not drop every key's history."""
    table = MemoryGlobalTable("rates", HISTORY)
    table.put("eur", 1, 1_000, wall=1_000)
    table.put("usd", 2, 10**15, wall=1_000)  # decades ahead
    assert table.horizon == 1_000 + DEFAULT_MAX_FUTURE_MS - HISTORY
    assert table.get("usd", as_of=10**15) == 2 and table.get("eur", as_of=10**15) == 1
    assert table.get("eur", as_of=table.horizon) == 1
