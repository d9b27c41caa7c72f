"""The container files: the Dockerfile copies what the package needs, `docker compose config`
accepts the compose file and names every zeitgeist computation as its own service, and, when
a Docker engine answers, the image builds, runs as a non-root user with a health check, and
runs the demo through compose (Kafka, topics, the four computations, the injector); with
podman-compose (`make chaos`), the same services run the demo through a replica's SIGKILL."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from framework.core.clock import now_ms
from framework.serde.catalogue import decoder_for
from framework.streaming.loading import load_pipeline
from tests.support import read_topic
from tests.support_containers import ENV, build_image, missing, podman, podman_compose

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
pytestmark = pytest.mark.timeout(1800)
FULL = os.environ.get("LOGWHEEL_CHAOS_FULL") == "1"
SECONDS = 120  # of searches, sent at 12 times real time


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


@pytest.mark.skipif(not FULL, reason="make chaos: zeitgeist's topics are global, two minutes")
@pytest.mark.skipif(
    missing() is not None or podman_compose() is None,
    reason=str(missing() or "no podman-compose: pip install -e '.[test]'"),
)
def test_the_compose_file_runs_the_demo_with_podman_compose_through_a_replica_killed(
    kafka, tmp_path
):
    """docker-compose.yml's services under podman-compose: the job image built from the
    Dockerfile, `topics`, then the four computations with window-counter twice; one of its
    replicas SIGKILLed and started again while searches flow; the planted anomalies found and
    nothing else; every computation's container leaves with 0 on SIGTERM. Kafka's service
    is the session's broker here (no registry to pull apache/kafka from), on the host's
    network as every container is."""
    from jobs.demo import clean_slate
    from jobs.zeitgeist import demo, pipeline
    from jobs.zeitgeist.generator import planted
    from jobs.zeitgeist.inject import inject

    image = build_image()
    services = ["window-counter", "model", "spike-detector", "dip-detector"]
    here = {
        "network_mode": "host",
        "image": image,
        "environment": {"LOGWHEEL_BOOTSTRAP": kafka, "LOGWHEEL_METRICS_PORT": ""},
    }
    override = {"services": {name: dict(here) for name in ["topics", *services]}}
    (tmp_path / "override.yml").write_text(json.dumps(override))  # YAML is a superset of JSON
    project = f"lwtest{uuid.uuid4().hex[:8]}"
    compose = [podman_compose(), "--in-pod=false", "-p", project, "-f", str(COMPOSE),
               "-f", str(tmp_path / "override.yml")]  # fmt: skip

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        done = subprocess.run([*compose, *args], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO, env=ENV)  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done

    def container(service: str, n: int = 1) -> str:
        return f"{project}_{service}_{n}"

    clean_slate(kafka, pipeline, tmp_path / "state")
    try:
        run("up", "-d", "--no-deps", "topics")
        assert podman("wait", container("topics"), timeout=120).stdout.strip() == "0"
        run("up", "-d", "--no-deps", "--scale", "window-counter=2", *services)
        start = now_ms() - SECONDS * 1000
        feeding = threading.Thread(target=inject, args=(kafka, start, SECONDS, 12), daemon=True)
        feeding.start()
        time.sleep(3)
        podman("kill", "-s", "KILL", container("window-counter"))
        podman("wait", container("window-counter"))
        # starts the killed one again, unless its restart policy did
        run("up", "-d", "--no-deps", "--scale", "window-counter=2", "window-counter")
        feeding.join()
        found = [
            decoder_for("zeitgeist.Anomaly")(m.value())
            for m in read_topic(kafka, "anomalies", timeout=180, idle=20)
        ]
        assert demo._report(found, planted(start)) == 0, found
        names = [container(s) for s in services] + [container("window-counter", 2)]
        for name in names:
            podman("stop", "-t", "15", name, timeout=90)
            code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
            assert code == "0", podman("logs", name, check=False).stderr[-3000:]
    finally:
        subprocess.run([*compose, "down", "-v"], capture_output=True, timeout=300, cwd=REPO,
                       env=ENV)  # fmt: skip
        # `down` knows the services' first replicas only: the scaled ones go by label
        label = f"label=io.podman.compose.project={project}"
        left = podman("ps", "-aq", "--filter", label, check=False).stdout.split()
        if left:
            podman("rm", "-f", "-v", *left, check=False)
