"""What every job's demo does: a clean slate on the broker, and the job as a real process."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from framework.core.pipeline import Pipeline
from framework.kafka.topics import create_topics, pipeline_topics


def clean_slate(bootstrap: str, pipeline: Pipeline, state_dir: Path) -> None:
    """Delete the pipeline's topics and local state left by earlier demos, and create the
    topics anew."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=30).topics)
    names = [t.name for t in pipeline_topics(pipeline) if t.name in existing]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            future.result()
        while set(names) & set(admin.list_topics(timeout=30).topics):
            time.sleep(0.2)
    shutil.rmtree(state_dir, ignore_errors=True)
    create_topics(bootstrap, pipeline)


def start_job(ref: str, bootstrap: str, state_dir: Path, log: Path) -> subprocess.Popen:
    """`logwheel run REF` in the background, its output in `log`."""
    out = open(log, "w")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "run", ref,
             "--bootstrap", bootstrap, "--state-dir", str(state_dir)],
            stdout=out, stderr=out,
        )  # fmt: skip
    finally:
        out.close()
