"""`logwheel run` of several computations: one process each, supervised together."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import Job, unique_name, write_job

pytestmark = pytest.mark.timeout(300)

JOB = """
from framework import Computation, Pipeline


class Fine(Computation):
    def process_record(self, ctx, record):
        pass


class Broken(Computation):
    def __init__(self):
        raise RuntimeError("cannot load its model")

    def process_record(self, ctx, record):
        pass


pipeline = Pipeline(NAME)
pipeline.source(NAME + "-in")
pipeline.computation("fine", Fine, inputs={NAME + "-in": None})
pipeline.computation("broken", Broken, inputs={NAME + "-in": None})
"""


def test_a_crash_of_any_child_stops_the_job(kafka, tmp_path):
    """The crashing computation is declared second: the supervisor must not wait for the
    first, healthy one (which would run forever) before it sees the crash."""
    name = unique_name("launch")
    module = write_job(tmp_path, name.replace("-", "_"), f"NAME = {name!r}\n" + JOB)
    job = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "state", path=tmp_path)
    job.start()
    try:
        # A liveness bound: the crash comes within seconds of the start; 120 s leaves room for
        # a loaded machine's imports and group joins, and a job that waits on its healthy
        # child never ends at all.
        code = job.proc.wait(120)
    except subprocess.TimeoutExpired:
        job.kill()
        pytest.fail("the job kept running after its second computation crashed")
    assert code == 1, job.output()
    assert "computation broken exited with 1" in job.output()
