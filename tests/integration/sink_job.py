"""Pipelines with a PostgreSQL sink, for the sink's integration, chaos and security tests: built by
`tests.support.UniqueJob` under a fresh name, written as job modules `logwheel run` imports."""

from __future__ import annotations

from framework import Computation, Pipeline
from framework.sinks import PostgresSink


def orders_sink(
    name: str, prefix: str, dsn: str, table: str, key: tuple | None = None, batch: int = 200,
    partitions: int = 2,
) -> Pipeline:  # fmt: skip
    """`<prefix>orders` (a source) written into `table`: appended, or upserted on `key`."""
    pipeline = Pipeline(name, partitions=partitions)
    pipeline.source(f"{prefix}orders")
    pipeline.sink(
        "db",
        inputs={f"{prefix}orders": None},
        sink=PostgresSink(dsn, table, key=key, batch=batch),
    )
    return pipeline


class Totals(Computation):
    """Per key, the running total of `amount`, produced on every change."""

    def process_record(self, ctx, record) -> None:
        total = ctx.state.get("total", 0) + record.value["amount"]
        ctx.state["total"] = total
        ctx.produce(self.output, {"key": ctx.key, "total": total, "n": ctx.state.get("n", 0) + 1})
        ctx.state["n"] = ctx.state.get("n", 0) + 1


def totals_sink(
    name: str, prefix: str, dsn: str, table: str, batch: int = 100, key: tuple | None = ("key",),
) -> Pipeline:  # fmt: skip
    """`<prefix>amounts` summed per key by a computation whose output is upserted on `key`
    (`key=None`: appended, a row per update)."""
    pipeline = Pipeline(name, partitions=2)
    pipeline.source(f"{prefix}amounts")
    output = f"{prefix}totals"

    def totals() -> Totals:
        computation = Totals()
        computation.output = output
        return computation

    pipeline.computation("totals", totals, inputs={f"{prefix}amounts": None},
                         outputs={output: None})  # fmt: skip
    pipeline.sink("db", inputs={output: None}, sink=PostgresSink(dsn, table, key=key, batch=batch))
    return pipeline
