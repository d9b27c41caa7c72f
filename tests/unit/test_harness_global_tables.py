"""Global tables in the Harness: values put with their times and read as of a record's time,
as `run` and the backfill read them (tests/integration/test_global_tables.py compares the
three); a lookup before the table's history horizon dead-letters its record at stage "table";
misuse named."""

from __future__ import annotations

import pytest

from framework import Computation, Pipeline
from framework.errors import UsageError
from framework.testing import Harness
from tests.global_rates import HISTORY_MS, build

T0 = 1_700_000_000_000


def test_a_record_meets_the_rate_its_currency_had_at_its_time():
    harness = Harness(build("gr", "gr-"), "convert")
    harness.set_table("rates", "EUR", {"rate": 1.0}, timestamp=T0)
    harness.set_table("rates", "EUR", {"rate": 1.2}, timestamp=T0 + 100)
    harness.set_table("rates", "USD", {"rate": 0.9}, timestamp=T0 + 50)
    harness.set_table("rates", "USD", None, timestamp=T0 + 150)  # no rate from then on
    for i, (currency, ts) in enumerate(
        [("EUR", T0 + 99), ("EUR", T0 + 100), ("USD", T0 + 49), ("USD", T0 + 60), ("USD", T0 + 150)]
    ):
        harness.send("gr-orders", currency, {"id": i, "currency": currency}, ts)
    rates = [r.value["rate"] for r in harness.outputs("gr-converted")]
    assert rates == [1.0, 1.2, None, 0.9, None]


def test_a_lookup_older_than_the_history_dead_letters_its_record_at_stage_table():
    harness = Harness(build("gr", "gr-"), "convert")
    harness.set_table("rates", "EUR", {"rate": 1.0}, timestamp=T0)
    harness.set_table("rates", "EUR", {"rate": 1.1}, timestamp=T0 + HISTORY_MS + 10)
    harness.send("gr-orders", "EUR", {"id": 1, "currency": "EUR"}, T0 + 5)  # before the horizon
    harness.send("gr-orders", "EUR", {"id": 2, "currency": "EUR"}, T0 + 10)  # at it
    [dead] = harness.dead_letter_details()
    assert (dead.record.value["id"], dead.stage) == (1, "table")
    assert "raise history_ms" in str(dead.error)
    assert [r.value for r in harness.outputs("gr-converted")] == [{"id": 2, "rate": 1.0}]


class Latest(Computation):
    def process_record(self, ctx, record):
        ctx.produce("out", {"name": ctx.table("names").get(ctx.key)})
        ctx.table("names").get(ctx.key, as_of=record.timestamp)  # no history: a usage error


def test_a_table_without_history_answers_the_latest_and_refuses_as_of():
    pipeline = Pipeline("gl").source("in")
    pipeline.computation(
        "c", Latest, inputs={"in": None}, outputs={"out": None}, global_tables={"names": "n"}
    )
    harness = Harness(pipeline, "c")
    harness.set_table("names", "a", "ann")
    harness.send("in", "a", {}, T0)
    [dead] = harness.dead_letter_details()
    assert isinstance(dead.error, UsageError) and "history_ms=" in str(dead.error)
    assert harness.outputs("out") == []
    with pytest.raises(UsageError, match="give the record's time"):
        Harness(build("gr", "gr-"), "convert").set_table("rates", "EUR", {"rate": 1.0})


def test_a_windowed_reduce_with_tables_reads_a_global_table_as_of_each_record():
    from framework import GlobalTable, windows

    def add(total, record, table):
        rate = table("rates").get(record.value["currency"], as_of=record.timestamp)
        return total + record.value["amount"] * rate["rate"]

    pipeline = Pipeline("gw").source("orders")
    pipeline.windowed(
        "eur-per-minute",
        inputs={"orders": None},
        window=windows.Tumbling(size_ms=60_000),
        aggregate=windows.Reduce(0, add, tables=True),
        output="eur",
        global_tables={"rates": GlobalTable("fx", history_ms=HISTORY_MS)},
    )
    harness = Harness(pipeline, "eur-per-minute")
    harness.set_table("rates", "USD", {"rate": 2}, timestamp=T0)
    harness.set_table("rates", "USD", {"rate": 3}, timestamp=T0 + 30_000)
    for amount, ts in [(1, T0 + 1), (10, T0 + 30_000), (100, T0 + 29_999)]:
        harness.send("orders", "shop", {"currency": "USD", "amount": amount}, ts)
    harness.advance_watermark(T0 + 60_000)
    [result] = harness.outputs("eur")
    assert result.value["value"] == 1 * 2 + 10 * 3 + 100 * 2
