"""Running a pipeline's parts (its computations and sinks), one process each: a single one in
this process, several as children of this one, supervised.

A process runs one part (one consumer group, one producer — invariant 3). `logwheel run` of
several parts supervises one child per part; the children die with their parent, so SIGKILL of
`logwheel run` kills the whole job, as a container stop would.
A child that fails stops the job, but for one ended by its dead-man switch (a hook held the
GIL for good: framework/streaming/dead_man.py), which is started again, with backoff: its next
start dead-letters the call, and the job stays up.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from framework.core.metrics import serve as serve_metrics
from framework.core.pipeline import Pipeline, PipelineError
from framework.kafka.registry_settings import RegistrySettings
from framework.query.replicas import Replicas
from framework.query.server import QueryServer
from framework.query.settings import parse_serve, serve_settings
from framework.streaming.dead_man import DeadMan
from framework.streaming.loading import (
    config_table,
    kafka_settings,
    load_pipeline,
    registry_settings,
)
from framework.streaming.runner import Runner

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
RESTART_BACKOFF_S = (1.0, 60.0)
"""The first and the longest wait before a child ended by its dead-man switch starts again
(doubled at each such end in a row; back to the first once it ran as long as the longest)."""


def run_computations(
    ref: str,
    names: list[str],
    *,
    bootstrap: str,
    state_dir: Path,
    config_file: str | None = None,
    standby: int = 0,
    metrics_port: int | None = None,
    metrics_addr: str = "127.0.0.1",
    instance_id: str | None = None,
    log_format: str | None = None,
    commit_interval_ms: int | None = None,
    serve: str | None = None,
) -> int:
    """Run the named computations (all when empty) until SIGTERM; returns an exit code.

    `instance_id` (every child gets the same: members and transactional ids are per
    computation, so they stay distinct) and `log_format` pass on to the children.

    With `metrics_port`, each process serves Prometheus metrics: one computation on that port;
    several on consecutive ports from it, in the order named (0: each a free port, logged), on
    `metrics_addr` (loopback unless chosen).

    With `serve` (`[HOST:]PORT`, HOST 127.0.0.1 by default), each process answers queries of
    its computation's state (framework/query/server.py), ports given as for metrics: one
    computation on PORT; several on PORT, PORT+1, ... in the order named (0: each a free one,
    published for the others to find); TLS and a token from `[serve]` in `config_file`."""
    pipeline = load_pipeline(ref)
    runnable = [part.name for part in pipeline.parts() if part.runtime]
    names = names or runnable
    for name in names:
        if name not in runnable:  # fails at start naming what it may run
            raise PipelineError(
                f"pipeline {pipeline.name!r} has no computation or sink {name!r} to run; it "
                f"has {', '.join(runnable)}"
            )
    kafka = kafka_settings(config_file)
    registry = registry_settings(config_file)
    if standby < 0:
        raise PipelineError(f"--standby {standby}: give a number of partitions >= 0")
    tuning = {"standby": standby, "instance_id": instance_id}
    if commit_interval_ms is not None:
        if commit_interval_ms <= 0:
            raise PipelineError(f"--commit-interval-ms {commit_interval_ms}: give milliseconds > 0")
        tuning["commit_interval_ms"] = commit_interval_ms
    address = None if serve is None else parse_serve(serve)
    if len(names) == 1:
        if metrics_port is not None:
            serve_metrics(metrics_port, metrics_addr)
        server = None
        if address is not None and pipeline.part(names[0]).queryable:
            host, port = address
            origin = f"--config {config_file} [serve]"
            settings = serve_settings(config_table(config_file, "serve"), origin)
            server = QueryServer(
                pipeline, names[0], Replicas(), bootstrap=bootstrap, kafka=kafka,
                settings=settings, host=host, port=port,
            )  # fmt: skip
            tuning["server"] = server
        try:
            return _run_one(pipeline, names[0], bootstrap, state_dir, kafka, registry, tuning)
        finally:
            if server is not None:
                server.close()
    options = {
        "--commit-interval-ms": commit_interval_ms,
        "--standby": standby or None,
        "--instance-id": instance_id,
        "--log-format": log_format,
        "--metrics-addr": metrics_addr,
    }
    homes = {name: Path(state_dir) / pipeline.name / name for name in names}
    return _supervise(ref, homes, bootstrap, state_dir, config_file, options, metrics_port, address)


def _run_one(
    pipeline: Pipeline,
    name: str,
    bootstrap: str,
    state_dir: Path,
    kafka: dict,
    registry: RegistrySettings | None,
    tuning: dict,
) -> int:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    runner = Runner(
        pipeline,
        name,
        bootstrap=bootstrap,
        state_dir=state_dir,
        kafka=kafka,
        registry=registry,
        owns_process=True,
        **tuning,
    )
    runner.run(stop)
    return 0


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _supervise(
    ref: str,
    homes: dict[str, Path],
    bootstrap: str,
    state_dir: Path,
    config_file: str | None,
    options: dict[str, object],
    metrics_port: int | None,
    address: tuple[str, int] | None = None,
) -> int:
    base = [sys.executable, "-m", "framework.cli", "run", ref, "--bootstrap", bootstrap]
    base += ["--state-dir", str(state_dir)]
    if config_file:
        base += ["--config", config_file]
    for option, value in options.items():
        if value is not None:
            base += [option, str(value)]

    def args(i: int, name: str) -> list[str]:
        port = (
            []
            if metrics_port is None
            else ["--metrics-port", str(metrics_port and metrics_port + i)]
        )
        if address is not None:
            host, first = address
            port += ["--serve", f"[{host}]:{first and first + i}"]
        return [*base, "--computation", name, *port]

    names = list(homes)
    started: dict[str, float] = {}
    backoff = dict.fromkeys(names, RESTART_BACKOFF_S[0])

    def start(name: str) -> subprocess.Popen:
        started[name] = time.monotonic()
        return subprocess.Popen(args(names.index(name), name), preexec_fn=_die_with_parent)

    children = {name: start(name) for name in names}
    stopping = threading.Event()

    def forward(signum, _frame):
        stopping.set()
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    by_pid = {child.pid: name for name, child in children.items()}
    code = 0
    while by_pid:  # whichever child ends first, not the first one started
        pid, status = os.wait()
        name = by_pid.pop(pid, None)
        if name is None:
            continue
        rc = os.waitstatus_to_exitcode(status)
        children[name].returncode = rc
        if rc != 0 and not stopping.is_set() and DeadMan(homes[name], 0).previous():
            first, longest = RESTART_BACKOFF_S
            if time.monotonic() - started[name] > longest:
                backoff[name] = first
            wait, backoff[name] = backoff[name], min(longest, 2 * backoff[name])
            log.error(
                "computation %s was ended by its dead-man switch (a hook held the GIL): "
                "starting it again in %g s",
                name,
                wait,
            )
            if not stopping.wait(wait):  # else the job is stopping: nothing to start again
                children[name] = start(name)
                by_pid[children[name].pid] = name
            continue
        if rc != 0 and code == 0:
            log.error("computation %s exited with %d; stopping the others", name, rc)
            code = rc if rc > 0 else 1
            forward(signal.SIGTERM, None)
    return code
