"""Jobs as real containers, run by podman: the image the Dockerfile describes, built on the
local Debian base (ops/containers/base-image.sh), and `logwheel run` containers on the host's
network, so they reach the test broker on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTAINERS = REPO / "ops" / "containers"
# cgroupfs and runc, the machine's ulimits, the host's network: every podman call of the tests
# (podman-compose's included) reads them from here
ENV = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS / "containers.conf")}
IMAGE = "localhost/logwheel-test:" + hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
"""The job image of this checkout: two clones side by side build tags of their own."""


def missing() -> str | None:
    """Why the container tests cannot run here (one line), or None."""
    for tool in ("podman", "runc", "debootstrap"):
        if shutil.which(tool) is None:
            return f"no {tool}: apt-get install -y podman runc debootstrap podman-compose"
    if os.geteuid() != 0:
        return "the base image's debootstrap needs root (ops/containers/base-image.sh)"
    return None


def podman_compose() -> str | None:
    """podman-compose 1.6 or newer (pyproject's test extra; Debian's 1.0.3 gives a service
    both `--network host` and its project network, and ignores `--no-deps`)."""
    beside = Path(sys.executable).parent / "podman-compose"
    return str(beside) if beside.exists() else shutil.which("podman-compose")


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {done.stderr[-3000:]}")
    return done


def build_image(target: str = "job", tag: str = IMAGE) -> str:
    """The Dockerfile's `target` built FROM the local Debian base (ops/containers/
    build-image.sh: the base made once per machine, the layers cached)."""
    started = time.monotonic()
    done = subprocess.run(
        [str(CONTAINERS / "build-image.sh"), tag, target],
        capture_output=True,
        text=True,
        timeout=900,
        env=ENV,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"built {tag} in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return tag


class Container:
    """One `logwheel run` container, named: its name is its instance id (the group member
    and transactional id), so a replacement of the same name is the same member."""

    def __init__(self, name: str, args: list[str], *, job: Path, bootstrap: str) -> None:
        self.name, self.args, self.job, self.bootstrap = name, args, job, bootstrap

    def start(self) -> Container:
        podman("rm", "-f", "-v", "--ignore", self.name)  # a killed predecessor of this name
        podman(
            "run",
            "-d",
            "--name",
            self.name,
            # podman 4 tells a container neither its name nor (on the host's network) a
            # hostname of its own: the name is given as the instance id
            "-e",
            f"LOGWHEEL_INSTANCE_ID={self.name}",
            "-e",
            f"LOGWHEEL_BOOTSTRAP={self.bootstrap}",
            "-e",
            "LOGWHEEL_METRICS_PORT=",  # containers on one host network: no port to share
            "-e",
            "PYTHONPATH=/app/job",
            "-v",
            f"{self.job}:/app/job/{self.job.name}:ro",
            IMAGE,
            *self.args,
        )
        return self

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def running(self) -> bool:
        done = podman("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return done.stdout.strip() == "true"

    def exit_code(self) -> int:
        return int(podman("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout)

    def wait_working(self, computations: int = 1, timeout: float = 90) -> Container:
        """Until each of its computations logged that it holds partitions; fails if it
        exited instead."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.logs().count(" assigned ") >= computations:
                return self
            assert self.running(), f"{self.name} exited: {self.logs()[-3000:]}"
            time.sleep(0.5)
        raise AssertionError(f"{self.name} took no partitions: {self.logs()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL, as a crash would (`podman kill -s KILL`)."""
        podman("kill", "-s", "KILL", self.name)
        podman("wait", self.name, timeout=60)

    def stop(self, grace: int) -> float:
        """`podman stop`: SIGTERM, SIGKILL after `grace` seconds; returns the seconds taken."""
        started = time.monotonic()
        podman("stop", "-t", str(grace), self.name, timeout=grace + 60)
        return time.monotonic() - started

    def remove(self) -> None:
        podman("rm", "-f", "-v", "--ignore", self.name, check=False)
