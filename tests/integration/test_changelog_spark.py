"""`changelog.spark.read_snapshot` on a real broker and a real Spark (local mode): the latest
state per key of a running job's changelog, deleted keys gone, equal to `ChangelogTable`'s."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from changelog import ChangelogTable
from changelog.spark import read_snapshot
from framework.backfill.session import session
from tests.support import UniqueJob, wait_for

pytestmark = pytest.mark.timeout(600)


def test_snapshot_equals_the_table_including_deleted_keys(kafka, tmp_path):
    job_def = UniqueJob(kafka, tmp_path, "jobs.enrich:build", "snap")
    changelog = f"{job_def.name}.profiles.changelog"
    producer = Producer({"bootstrap.servers": kafka})
    updates = [{"user": f"u{i}", "name": f"n{i}", "country": "FR"} for i in range(50)]
    updates += [{"user": f"u{i}", "country": "DE"} for i in range(10)]
    updates += [{"user": f"u{i}", "delete": True} for i in range(40, 50)]
    for update in updates:
        producer.produce(
            f"{job_def.prefix}profile-updates", json.dumps(update).encode(), update["user"].encode()
        )
    producer.flush(30)
    job = job_def.job(computations=["profiles"]).start()

    def table() -> dict:
        with ChangelogTable(changelog, bootstrap=kafka) as t:
            return dict(t.catch_up().items())

    try:
        expected = wait_for(lambda: len(t := table()) == 40 and t["u0"]["version"] == 2 and t, 90)
    finally:
        job.stop()
    spark = session("local[2]", "logwheel-test-snapshot")
    try:
        rows = read_snapshot(spark, changelog, bootstrap=kafka).collect()
    finally:
        spark.stop()
    assert {r["key"]: json.loads(r["value"]) for r in rows} == expected
    assert "u45" not in {r["key"] for r in rows}
