"""The join job of the integration tests (tests/integration/test_joins.py and the hand-over
in test_backfill.py): orders joined with their payments."""

from __future__ import annotations

import random
from pathlib import Path

from tests.support import import_job, job_source, write_job

JOINS_JOB = """
from framework import BoundedOutOfOrderness, InjectorWatermark, Pipeline, key_by

pipeline = Pipeline(NAME, partitions=2)
for stream in (ORDERS, PAYMENTS):
    pipeline.source(stream, watermark=InjectorWatermark("gen"))
by_order = {ORDERS: key_by("order"), PAYMENTS: key_by("order")}
for how in ("left", "outer"):
    pipeline.join(
        how, left=ORDERS, right=PAYMENTS, inputs=by_order, before_ms=100, after_ms=1000,
        grace_ms=200, how=how, output=NAME + "-" + how, on_late="dead_letter",
    )
for stream in (LIVE_ORDERS, LIVE_PAYMENTS):
    pipeline.source(stream, watermark=BoundedOutOfOrderness(ms=2000, idle_ms=500, live=True))
pipeline.join(
    "quiet", left=LIVE_ORDERS, right=LIVE_PAYMENTS,
    inputs={LIVE_ORDERS: None, LIVE_PAYMENTS: None}, before_ms=0, after_ms=500, how="outer",
    output=NAME + "-quiet",
)
"""
PERIOD = 2_000
T0 = 1_700_000_000_000


def joins_job(directory: Path, name: str) -> tuple:
    """Write the join job under `name` (its streams `<name>-orders`, `<name>-payments`,
    `<name>-live-orders`, `<name>-live-payments`): (pipeline, names, module)."""
    names = {"NAME": name}
    for stream in ("ORDERS", "PAYMENTS", "LIVE_ORDERS", "LIVE_PAYMENTS"):
        names[stream] = f"{name}-{stream.lower().replace('_', '-')}"
    module = write_job(directory, name.replace("-", "_"), job_source(JOINS_JOB, **names))
    return import_job(directory, module).pipeline, names, module


def block(rng: random.Random, i: int, orders: int) -> list[tuple[str, dict, int]]:
    """Block i's records (side, value, timestamp), shuffled: `orders` orders in its first
    second, each paid zero to two times from 200 ms before to 1.3 s after it (some outside the
    window). Every record of later blocks is at least `T0 + i * PERIOD - 200`."""
    start, records = T0 + i * PERIOD, []
    for n in range(orders):
        order, ts = f"o{rng.randrange(12)}", start + rng.randrange(1_000)
        records.append(("orders", {"order": order, "n": i * 1000 + n}, ts))
        for m in range(rng.choice((0, 1, 1, 2))):
            paid = {"order": order, "m": i * 1000 + n * 10 + m}
            records.append(("payments", paid, ts + rng.randrange(-200, 1_300)))
    rng.shuffle(records)
    return records
