"""A job for the global-table tests (issue 39): each order converted at the rate its currency
had at the order's time, looked up as of the record's time in a global table with history
(`fx rates`, a topic partitioned unlike the orders)."""

from __future__ import annotations

from framework import Computation, GlobalTable, Pipeline

HISTORY_MS = 86_400_000


class Convert(Computation):
    def __init__(self, output: str) -> None:
        self.output = output

    def process_record(self, ctx, record):
        order = record.value
        rate = ctx.table("rates").get(order["currency"], as_of=record.timestamp)
        ctx.produce(
            self.output,
            {"id": order["id"], "rate": None if rate is None else rate["rate"]},
        )


def build(name: str, prefix: str, partitions: int = 2) -> Pipeline:
    """Orders (`<prefix>orders`, by their Kafka key) converted on `<prefix>converted`, rates
    read from `<prefix>rates` (created by the test, any partition count)."""
    pipeline = Pipeline(name, partitions=partitions)
    pipeline.source(f"{prefix}orders")
    out = f"{prefix}converted"
    pipeline.computation(
        "convert",
        lambda: Convert(out),
        inputs={f"{prefix}orders": None},
        outputs={out: None},
        global_tables={"rates": GlobalTable(f"{prefix}rates", history_ms=HISTORY_MS)},
    )
    return pipeline


def harness_rates(pipeline: Pipeline, prefix: str, table: list, orders: list) -> list:
    """The Harness's answers `(id, rate)`, sorted, to `orders` (key, value, timestamp) after
    the rate records `table` (key, value or None, timestamp): what `run` and the backfill
    must answer too."""
    from framework.testing import Harness

    harness = Harness(pipeline, "convert")
    for currency, value, ts in table:
        harness.set_table("rates", currency, value, timestamp=ts)
    for currency, value, ts in orders:
        harness.send(f"{prefix}orders", currency, value, ts)
    return sorted((r.value["id"], r.value["rate"]) for r in harness.outputs(f"{prefix}converted"))
