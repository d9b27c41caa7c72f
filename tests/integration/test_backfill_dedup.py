"""Record-id deduplication across runtimes: a backfill on Spark drops the duplicates of a
retrying producer as streaming does and writes the ids it saw to the id journal, so `logwheel
run` after it drops re-sends of records the backfill processed — and a second backfill after
`run` reads the journal and drops re-sends of both."""

from __future__ import annotations

import random

import pytest

from framework.backfill.driver import backfill
from framework.backfill.session import session
from framework.kafka.topics import create_topics
from tests.integration.dedup_clicks import counted, per_key, send_clicks
from tests.support import (
    Job,
    import_job,
    job_source,
    read_topic,
    wait_until_resettable,
    write_job,
)

pytestmark = pytest.mark.timeout(900)

T0 = 1_700_000_000_000
JOB = """
from framework import Computation, Dedup, Pipeline


class Count(Computation):
    def process_record(self, ctx, record):
        n = ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.produce(CLICKS + "-counts", {"click": record.value["click"], "n": n})


pipeline = Pipeline(NAME, partitions=2)
pipeline.source(CLICKS)
pipeline.computation(
    "count", Count, inputs={CLICKS: None}, outputs={CLICKS + "-counts": None}, dedup=Dedup()
)
"""


def test_backfill_and_run_share_the_ids_each_drops_the_others_duplicates(kafka, tmp_path, unique):
    name = unique("bfdedup")
    clicks = f"{name}-clicks"
    module = write_job(tmp_path, name.replace("-", "_"), job_source(JOB, NAME=name, CLICKS=clicks))
    pipeline = import_job(tmp_path, module).pipeline
    create_topics(kafka, pipeline)
    rng = random.Random(5)
    first = [(f"u{rng.randrange(5)}", f"c{i}") for i in range(200)]
    first += rng.sample(first, 40)  # duplicates within the backfill's range
    second = rng.sample(first, 30) + [(f"u{rng.randrange(5)}", f"d{i}") for i in range(100)]
    third = rng.sample(first, 20) + rng.sample(second, 20) + [("u0", "e0")]
    want = counted(first + second + third, dedup=True)

    spark = session("local[2,3]", "logwheel-test-backfill-dedup")
    try:
        send_clicks(kafka, clicks, [(u, c, T0 + i) for i, (u, c) in enumerate(first)])
        summary = backfill(pipeline, "count", bootstrap=kafka, spark=spark)
        assert summary.records_out == len(set(first))
        send_clicks(kafka, clicks, [(u, c, T0 + 10_000 + i) for i, (u, c) in enumerate(second)])
        job = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "s", path=tmp_path)
        job.start()
        try:
            expect = len(set(first + second))
            read_topic(kafka, f"{clicks}-counts", expect=expect, timeout=120)
        finally:
            job.stop()
        send_clicks(kafka, clicks, [(u, c, T0 + 20_000 + i) for i, (u, c) in enumerate(third)])
        wait_until_resettable(pipeline, "count", kafka, tmp_path / "s")
        backfill(pipeline, "count", bootstrap=kafka, spark=spark)
    finally:
        spark.stop()
    got = read_topic(kafka, f"{clicks}-counts", to_end=True)  # the backfill has ended
    assert per_key(got) == want
