"""logwheel as a library: built as a wheel, installed (not editable) into a fresh virtualenv
outside the checkout, it runs a job that lives in another directory, with an Avro schema of
its own, end to end and exactly once; with the `[spark]` extra, the same job's backfill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from framework.serde.catalogue import load_schemas
from tests.support import REPO, produce, read_topic, unique_name, wait_for

pytestmark = pytest.mark.timeout(1200)

JOB = """
from framework import Computation, Pipeline


class CountWords(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.produce("{out}", {{"word": ctx.key, "count": ctx.state["n"]}})


pipeline = Pipeline("{name}")
pipeline.source("{words}")
pipeline.computation(
    "count",
    CountWords,
    inputs={{"{words}": None}},
    outputs={{"{out}": "myjob.Count"}},
    guarantee="exactly_once",
)
"""

SCHEMA = {
    "type": "record",
    "name": "Count",
    "namespace": "myjob",
    "fields": [{"name": "word", "type": "string"}, {"name": "count", "type": "long"}],
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(REPO)],
        check=True,
        timeout=600,
    )
    (built,) = dist.glob("logwheel-*.whl")
    return built


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH, nothing of this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LOGWHEEL_"))}
    return {**env, **extra}


def _venv(where: Path, wheel: Path, extra: str = "") -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    _pip(where, f"{wheel}{extra}")
    return where / "bin"


def _pip(venv: Path, requirement: str) -> None:
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement],
        check=True,
        timeout=900,
        env=_clean_env(),
    )


def _counts(kafka: str, topic: str, job: Path, expect: int) -> list[tuple[str, int]]:
    decode = load_schemas(job / "schemas").decoder_for("myjob.Count")
    records = read_topic(kafka, topic, expect=expect, timeout=120)
    return [(v["word"], v["count"]) for v in (decode(m.value()) for m in records)]


def test_an_installed_wheel_runs_and_backfills_a_job_from_another_directory(wheel, kafka, tmp_path):
    name = unique_name("wheel")
    words, out = f"{name}-words", f"{name}-counts"
    job = tmp_path / "my-repo"
    (job / "schemas").mkdir(parents=True)
    (job / "schemas" / "myjob.Count.avsc").write_text(json.dumps(SCHEMA))
    (job / "myjob.py").write_text(JOB.format(name=name, words=words, out=out))
    venv = tmp_path / "venv"
    bin_ = _venv(venv, wheel)
    env = _clean_env(LOGWHEEL_HOME=str(tmp_path / "home"))

    def logwheel(*args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(bin_ / "logwheel"), *args, "--bootstrap", kafka],
            cwd=job, env=env, capture_output=True, text=True, timeout=600, **kwargs,
        )  # fmt: skip

    done = logwheel("topics", "myjob:pipeline")
    assert done.returncode == 0, done.stderr
    first = ["a", "b", "a", "c", "a", "b"]
    produce(kafka, words, [(w, {"w": w}, None) for w in first])
    log = (tmp_path / "run.log").open("wb")
    run = subprocess.Popen(
        [str(bin_ / "logwheel"), "run", "myjob:pipeline", "--bootstrap", kafka],
        cwd=job, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        counts = _counts(kafka, out, job, expect=len(first))
    finally:
        run.send_signal(signal.SIGTERM)
        assert run.wait(60) == 0, (tmp_path / "run.log").read_text()[-3000:]
    assert sorted(counts) == sorted(_running_counts(first))

    with pytest.raises(subprocess.CalledProcessError):  # no Spark without the extra
        subprocess.run(
            [str(bin_ / "python"), "-c", "import pyspark"], check=True, capture_output=True
        )
    done = logwheel("backfill", "myjob:pipeline", "--computation", "count")
    assert done.returncode == 1 and "pip install 'logwheel[spark]'" in done.stderr

    _pip(venv, f"{wheel}[spark]")
    more = ["c", "d", "a"]
    produce(kafka, words, [(w, {"w": w}, None) for w in more])
    wait_for(lambda: _group_idle(kafka, name), timeout=60, what="the run's group to empty")
    done = logwheel("backfill", "myjob:pipeline", "--computation", "count")
    assert done.returncode == 0, done.stdout + done.stderr
    counts = _counts(kafka, out, job, expect=len(first) + len(more))
    assert sorted(counts) == sorted(_running_counts(first + more))
    assert any((tmp_path / "home" / "jars").glob("spark-kafka-*/spark-sql-kafka-*.jar"))


def _running_counts(words: list[str]) -> list[tuple[str, int]]:
    seen: Counter[str] = Counter()
    out = []
    for w in words:
        seen[w] += 1
        out.append((w, seen[w]))
    return out


def _group_idle(kafka: str, name: str) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka})
    group = f"{name}.count"
    described = admin.describe_consumer_groups([group])[group].result(30)
    return not described.members or time.sleep(1)


def test_the_wheel_carries_the_dashboard_page(wheel):
    """`logwheel ui` serves its page from package data: the wheel must hold every file of it
    (framework/ops/static/, pyproject's package-data)."""
    import zipfile

    from framework.ops.dashboard_server import STATIC

    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"framework/ops/static/{name}" for name, _ in STATIC.values()}
    assert shipped <= names, sorted(shipped - names)
