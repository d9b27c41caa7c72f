"""The container files: the Dockerfile copies what the package needs, `docker compose config`
accepts the compose file and names every zeitgeist computation as its own service, and, when
a Docker engine answers, the image builds, runs as a non-root user with a health check, and
runs the demo through compose (Kafka, topics, the four computations, the injector)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest

from framework.streaming.loading import load_pipeline

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
pytestmark = pytest.mark.timeout(1800)


def _answers(*args: str) -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", *args], capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


needs_compose = pytest.mark.skipif(
    not _answers("compose", "version"), reason="no `docker compose` client here"
)
needs_engine = pytest.mark.skipif(
    not (_answers("info") and _answers("compose", "version")),
    reason="no Docker engine answers here",
)


def test_the_job_image_copies_every_package_and_the_schemas():
    """A package added to pyproject.toml but not to the Dockerfile would fail only in a
    container, at import time."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+) \1$", dockerfile, re.MULTILINE))
    assert {*packages, "schemas"} <= copied
    assert "HEALTHCHECK" in dockerfile and "VOLUME /state" in dockerfile
    stages = {
        block.split()[3]: block for block in re.split(r"^(?=FROM )", dockerfile, flags=re.M)[1:]
    }
    job = "\n".join(line for line in stages["job"].splitlines() if not line.startswith("#"))
    assert not re.search(r"jdk|jre|java", job, re.IGNORECASE), "no JVM in the job image"
    for stage in ("job", "backfill"):
        users = re.findall(r"^USER (\S+)$", stages[stage], re.MULTILINE)
        assert users and users[-1] not in ("root", "0"), f"{stage} runs as root"
    assert "openjdk" in stages["backfill"] and "LOGWHEEL_SPARK_JARS" in stages["backfill"]


@needs_compose
def test_compose_config_names_every_zeitgeist_computation_as_a_service():
    done = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    services = json.loads(done.stdout)["services"]
    assert services["kafka"]["image"] == "apache/kafka:4.3.1"
    assert services["topics"]["command"] == ["topics", "jobs.zeitgeist:pipeline"]
    pipeline = load_pipeline("jobs.zeitgeist:pipeline")
    for name in pipeline.computations:
        assert name in services, f"no service for computation {name}"
        service = services[name]
        assert service["command"] == ["run", "jobs.zeitgeist:pipeline", "--computation", name]
        assert "topics" in service["depends_on"]
        assert not any(
            v.get("type") == "volume" and v.get("source") for v in service.get("volumes", [])
        ), f"{name}: replicas must not share a named state volume"


@needs_engine
def test_the_image_builds_and_the_demo_runs_through_compose():
    project = f"logwheel-test-{uuid.uuid4().hex[:8]}"
    compose = ["docker", "compose", "-f", str(COMPOSE), "-p", project]

    def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*compose, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
        )

    try:
        built = run("build")
        assert built.returncode == 0, built.stderr[-3000:]
        user = run("run", "--rm", "--no-deps", "--entrypoint", "id", "logwheel", "-u")
        assert user.returncode == 0 and user.stdout.strip() not in ("", "0"), user.stdout
        up = run("up", "-d", "--scale", "window-counter=2")  # waits for `topics` to finish
        assert up.returncode == 0, up.stderr[-3000:]
        fed = run("run", "--rm", "inject", "--seconds", "120", "--speed", "8")
        assert fed.returncode == 0, fed.stderr[-3000:]
        from tests.support import read_topic

        anomalies = read_topic("127.0.0.1:9092", "anomalies", timeout=180, idle=30)
        assert anomalies, "the demo found no anomaly: " + run("logs").stdout[-3000:]
    finally:
        run("down", "-v", "--remove-orphans", timeout=300)
