"""`logwheel status --json` on a real broker: per partition, the watermark lag the injector
promised, a consumer lag of 0 once a transactional input is drained (markers do not count),
the last commit and the owner."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from framework.clock import now_ms
from framework.injector import Injector
from tests.support import REPO, import_job, job_source, start_job, unique_name, wait_for, write_job

pytestmark = pytest.mark.timeout(300)

JOB = """
from framework import Computation, Pipeline
from framework.pipeline import InjectorWatermark


class Count(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1


pipeline = Pipeline(NAME, partitions=2)
pipeline.source(NAME + "-in", watermark=InjectorWatermark("gen"))
pipeline.computation("count", Count, inputs={NAME + "-in": None})
"""


def status_json(module: str, path, kafka: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "framework.cli", "status", f"{module}:pipeline", "--json",
         "--bootstrap", kafka],
        capture_output=True, text=True, check=True, cwd=REPO,
        env={"PYTHONPATH": f"{path}:{REPO}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_status_reports_watermark_lag_and_a_drained_transactional_input(kafka, tmp_path):
    name = unique_name("status")
    module = write_job(tmp_path, name.replace("-", "_"), job_source(JOB, NAME=name))
    pipeline = import_job(tmp_path, module).pipeline
    job = start_job(tmp_path, module, kafka)
    try:
        promised = now_ms() - 60_000
        with Injector(pipeline, "gen", bootstrap=kafka) as injector:
            for i in range(50):
                injector.send(f"{name}-in", {"i": i}, key=f"k{i}", timestamp=promised)
            injector.advance(promised)

        def settled():
            rows = status_json(module, tmp_path, kafka)
            ok = len(rows) == 2 and all(r["consumer_lag"] == 0 and r["low_watermark"] for r in rows)
            return ok and rows

        rows = wait_for(settled, 90, what="the input drained and the marks published")
    finally:
        job.stop()
    for row in rows:
        assert row["computation"] == "count" and row["topic"] == f"{name}-in"
        assert row["low_watermark"] == promised
        assert 60_000 <= row["lag_ms"] < 60_000 + 90_000
        assert row["last_commit"] is not None and row["owner"]
