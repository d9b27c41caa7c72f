"""A three-stage windowed pipeline for the chaos tests: per-key counts, per-window totals and
ten-second rollups, each closed by event-time timers, so every stage depends on watermarks."""

from __future__ import annotations

from framework import Computation, InjectorWatermark, Pipeline, key_by

WINDOW = 1_000
BUCKET = 10_000


class Windowed(Computation):
    """Sums `field` of its input (1 per record when None) per key per `size` ms window and
    emits {key, window, total} once the watermark passes the window's end."""

    def __init__(self, out: str, size: int, field: str | None) -> None:
        self.out, self.size, self.field = out, size, field

    def process_record(self, ctx, record):
        window = record.value["window"] if self.field else record.timestamp
        start = window - window % self.size
        add = record.value[self.field] if self.field else 1
        ctx.state[str(start)] = ctx.state.get(str(start), 0) + add
        ctx.set_timer(str(start), start + self.size)

    def process_timer(self, ctx, timer):
        start = timer.time - self.size
        total = ctx.state.pop(str(start))
        ctx.produce(
            self.out,
            {"key": ctx.key, "window": start, "total": total},
            timestamp=timer.time - 1,
        )


def build(
    name: str, prefix: str, guarantee: str = "exactly_once", schema: str | None = None
) -> Pipeline:
    """`schema` "zeitgeist.SearchQuery" makes the events Avro, keyed by their query (the
    seeded chaos run, so an unknown writer fingerprint is a fault of its own); else JSON
    {"key": ...}."""
    events, counts, totals, rollups = (
        f"{prefix}{s}" for s in ("events", "counts", "totals", "rollups")
    )
    pipeline = Pipeline(name)
    pipeline.source(events, schema=schema, watermark=InjectorWatermark("feeder"))
    pipeline.computation(
        "count",
        lambda: Windowed(counts, WINDOW, None),
        inputs={events: key_by("query" if schema else "key")},
        outputs={counts: None},
        guarantee=guarantee,
    )
    pipeline.computation(
        "total",
        lambda: Windowed(totals, WINDOW, "total"),
        inputs={counts: lambda r: str(r.value["window"])},
        outputs={totals: None},
        guarantee=guarantee,
    )
    pipeline.computation(
        "rollup",
        lambda: Windowed(rollups, BUCKET, "total"),
        inputs={totals: lambda r: str(r.value["window"] // BUCKET)},
        outputs={rollups: None},
        guarantee=guarantee,
    )
    return pipeline
