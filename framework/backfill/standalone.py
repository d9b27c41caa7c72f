"""A Spark standalone cluster on this machine, on loopback only: Spark's own master and
workers (pyspark's `bin/spark-class`), for showing and testing that a backfill scales out
with workers (`bench/backfill.py`, tests). Its processes are stopped on the way out, even
when the block fails, and their executors with them (each worker is a process group)."""

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

from framework.errors import ConfigurationError
from framework.jvm.process import any_free_port

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 120.0


class Cluster(NamedTuple):
    url: str  # spark://127.0.0.1:PORT, the master
    workers: tuple[int, ...]  # the workers' process ids (their executors are their children)


def client_conf(pythonpath: str | None = None) -> dict[str, str]:
    """Spark settings for a driver of the local cluster: everything on loopback, executors
    importing the driver's modules (`PYTHONPATH`)."""
    conf = {"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK}
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
    port, ui = any_free_port(), any_free_port()
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="logwheel-spark-")))

        def start(name: str, *args: str) -> int:
            log = stack.enter_context(open(work / f"{name}.log", "wb"))  # noqa: SIM115
            proc = subprocess.Popen([spark_class, *args], env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
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
        yield Cluster(master, tuple(pids))


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
