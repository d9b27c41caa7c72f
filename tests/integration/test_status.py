"""`logwheel status --json` on a real broker: per partition, the watermark lag the injector
promised, a consumer lag of 0 once a transactional input is drained (markers do not count),
the last commit and the owner; undecodable marks are skipped and marks of an earlier
`logwheel.Watermark` version are read, by the runner and by status."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from fastavro import schemaless_writer

from framework.core.clock import now_ms
from framework.serde.avro_codec import MARKER
from framework.serde.catalogue import default_schemas
from framework.streaming.injector import Injector
from tests.support import REPO, import_job, job_source, start_job, unique_name, wait_for, write_job

pytestmark = pytest.mark.timeout(300)

JOB = """
from framework import Computation, Pipeline
from framework.core.pipeline import InjectorWatermark


class Count(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1


pipeline = Pipeline(NAME, partitions=2)
pipeline.source(NAME + "-in", watermark=InjectorWatermark("gen"))
pipeline.computation("count", Count, inputs={NAME + "-in": None})
"""


def first_version_mark(producer: str, watermark: int, topic: str) -> bytes:
    """A mark as logwheel.Watermark v1 (before input_watermark) encoded it, naming both
    partitions of `topic` as every writer's mark does (-1: nothing written since it took over)."""
    schemas = default_schemas()
    v1 = dict(schemas.history["logwheel.Watermark"])[1]
    fp = next(fp for fp, (v, _) in schemas._older.items() if v == "logwheel.Watermark v1")
    buf = io.BytesIO()
    buf.write(MARKER + fp)
    offsets = [{"topic": topic, "partition": p, "offset": -1} for p in range(2)]
    value = {"producer": producer, "watermark": watermark, "idle": False, "offsets": offsets}
    schemaless_writer(buf, v1, {**value, "generation": 0, "sequence": 0})
    return buf.getvalue()


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
        # garbage on both channels is skipped; a mark of the first Watermark version is read
        later = promised + 1_000
        producer = Producer({"bootstrap.servers": kafka})
        for channel in (f"{name}.gen.watermarks", f"{name}.count.watermarks"):
            producer.produce(channel, b"\xc3\x01 not a mark", b"junk", partition=0)
        old = first_version_mark("gen/injector/0", later, f"{name}-in")
        producer.produce(f"{name}.gen.watermarks", old, b"gen/injector/0", partition=0)
        producer.flush(30)
        wait_for(
            lambda: all(r["low_watermark"] == later for r in status_json(module, tmp_path, kafka)),
            90,
            what="the runner to read the first-version mark and publish it",
        )
        assert job.alive(), job.output()[-2000:]
    finally:
        job.stop()
    for row in rows:
        assert row["computation"] == "count" and row["topic"] == f"{name}-in"
        assert row["low_watermark"] == promised
        assert 60_000 <= row["lag_ms"] < 60_000 + 90_000
        assert row["last_commit"] is not None and row["owner"]
