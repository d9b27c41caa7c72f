"""A Spark standalone cluster on this machine, on loopback only: Spark's own master and
workers (pyspark's `bin/spark-class`), for showing and testing that a backfill scales out
with workers (`bench/backfill.py`, tests). Its processes are stopped on the way out, even
when the block fails, and their executors with them (each worker is a process group).

Only holders of the cluster's secret, made afresh for each cluster, connect to it: without it
any local user could register an application and have the workers run its code as this user
(`authentication.py`). The daemons read the secret from a 0600 properties file in the
cluster's 0700 directory (`--properties-file`; `SPARK_DAEMON_JAVA_OPTS` would put it on their
command lines, which every local user can read), drivers get it from `client_conf`, and the
workers hand it to their executors in the environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

from framework.backfill.authentication import (
    LOOPBACK,
    LOOPBACK_DRIVER,
    daemon_settings,
    new_secret,
)
from framework.backfill.session import properties_text
from framework.errors import ConfigurationError
from framework.jvm.process import any_free_port
from framework.private_files import PRIVATE_UMASK, write_private

START_TIMEOUT_S = 120.0


class Cluster(NamedTuple):
    url: str  # spark://127.0.0.1:PORT, the master
    workers: tuple[int, ...]  # the workers' process ids (their executors are their children)
    secret: str  # what its master, workers and applications share (spark.authenticate)
    ui: str  # http://127.0.0.1:PORT, the master's web page (`/json/` lists the workers)


def client_conf(cluster: Cluster, pythonpath: str | None = None) -> dict[str, str]:
    """Spark settings for a driver of the local cluster: its secret, everything on loopback,
    executors importing the driver's modules (`PYTHONPATH`). They hold the secret: give them
    to `session` (a private file), never to a command line."""
    conf = {**daemon_settings(cluster.secret), **LOOPBACK_DRIVER}
    path = os.environ.get("PYTHONPATH", "") if pythonpath is None else pythonpath
    return conf | ({"spark.executorEnv.PYTHONPATH": path} if path else {})


@contextmanager
def standalone(workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """Start a master and `workers` workers of `cores` cores each; yields the cluster once
    every worker has registered."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": LOOPBACK}
    spark_class = str(home / "bin" / "spark-class")
    port, ui, secret = any_free_port(), any_free_port(), new_secret()
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="logwheel-spark-")))
        settings = work / "daemon.properties"
        write_private(settings, properties_text(daemon_settings(secret)))

        def start(name: str, *args: str) -> int:
            log = stack.enter_context(open(work / f"{name}.log", "wb"))  # noqa: SIM115
            proc = subprocess.Popen([spark_class, *args, "--properties-file", str(settings)],
                                    env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, umask=PRIVATE_UMASK)  # fmt: skip
            stack.callback(_stop, proc)
            return proc.pid

        master = f"spark://{LOOPBACK}:{port}"
        start("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
              "--port", str(port), "--webui-port", str(ui))  # fmt: skip
        pids = [
            start(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                LOOPBACK,
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                str(any_free_port()),
                "--work-dir",
                str(work / f"worker-{i}"),
                master,
            )  # fmt: skip
            for i in range(workers)
        ]
        _wait_for_workers(ui, workers, work)
        yield Cluster(master, tuple(pids), secret, f"http://{LOOPBACK}:{ui}")


def _wait_for_workers(ui: int, workers: int, work: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{ui}/json/", timeout=5) as answer:
                if json.load(answer).get("aliveworkers", 0) >= workers:
                    return
        except (OSError, ValueError):  # not up yet, or its UI still serving a page, not JSON
            pass
        time.sleep(0.5)
    logs = "; ".join(
        f"{p.name}: {p.read_text(errors='replace')[-300:]}" for p in work.glob("*.log")
    )
    raise ConfigurationError(f"the standalone Spark cluster did not start: {logs}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop a master or worker and whatever it started (its process group)."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue
