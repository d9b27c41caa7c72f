"""What every job's demo does: a clean slate on the broker, and the job as a real process."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from framework.broker.bootstrap import ensure_running
from framework.cli.options import confirmed
from framework.core.pipeline import Pipeline
from framework.kafka.topics import create_topics, pipeline_topics
from framework.private_files import private_dir


def add_target(parser: argparse.ArgumentParser) -> None:
    """--bootstrap and --yes: where a demo runs, and consent to wipe topics there."""
    parser.add_argument(
        "--bootstrap", help="another cluster (asks first; else the embedded broker)"
    )
    parser.add_argument("--yes", action="store_true", help="wipe there without asking")


def demo_bootstrap(args: argparse.Namespace, pipeline: Pipeline) -> str:
    """The embedded broker, unless --bootstrap or LOGWHEEL_BOOTSTRAP names a cluster: since a
    demo deletes its topics first, it then asks at a terminal, or needs --yes from a script
    (`make demo` runs on the embedded broker, unattended)."""
    named = args.bootstrap or os.environ.get("LOGWHEEL_BOOTSTRAP")
    if not named:
        return ensure_running()
    names = ", ".join(t.name for t in pipeline_topics(pipeline) if t.kind == "stream")
    question = f"the demo deletes and recreates {pipeline.name}'s topics ({names}) on {named}"
    if not confirmed(f"{question}: go on?", yes=args.yes, unattended=False):
        raise SystemExit(f"{question}: not confirmed; give --yes to allow it")
    return named


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
    private_dir(log.parent)
    out = open(log, "w")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "run", ref,
             "--bootstrap", bootstrap, "--state-dir", str(state_dir)],
            stdout=out, stderr=out,
        )  # fmt: skip
    finally:
        out.close()
