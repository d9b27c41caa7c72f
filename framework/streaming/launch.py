"""Starting computations: loading `MODULE:ATTR`, config files, and one process per computation.

A process runs one computation (one consumer group, one transactional producer — invariant 3).
`logwheel run` of several computations supervises one child per computation; the children die
with their parent, so SIGKILL of `logwheel run` kills the whole job, as a container stop would.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import signal
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

from framework.core.metrics import serve
from framework.core.pipeline import Pipeline, PipelineError
from framework.kafka.config import expand_env
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.registry_settings import registry_settings as parse_registry
from framework.streaming.runner import Runner

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1


def load_pipeline(ref: str) -> Pipeline:
    """Import `module:attr` (e.g. `jobs.zeitgeist:pipeline`) and check it is a Pipeline. The
    current directory is searched first, as `python -m` does: a job lives in its own
    repository, and `logwheel` is a console script of an installed package."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise PipelineError(f"{ref!r} must be MODULE:ATTR, e.g. jobs.wordcount:pipeline")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise PipelineError(
            f"cannot import {module_name!r} ({error}): check the name and PYTHONPATH"
        ) from None
    pipeline = getattr(module, attr, None)
    if not isinstance(pipeline, Pipeline):
        raise PipelineError(f"{ref} is not a logwheel Pipeline (found {type(pipeline).__name__})")
    pipeline.validate()
    return pipeline


def kafka_settings(config_file: str | None) -> dict[str, Any]:
    """The `[kafka]` table of a TOML config file: client settings passed through, with
    `${VAR}` references to the environment expanded (a missing variable fails at start)."""
    return expand_env(config_table(config_file, "kafka"), f"--config {config_file} [kafka]")


def spark_settings(config_file: str | None) -> dict[str, Any]:
    """The `[spark]` table of a TOML config file: Spark settings (`spark.executor.memory`,
    `spark.kubernetes.container.image`, ...) for `logwheel backfill`, with `${VAR}` references
    expanded as in `[kafka]` (a keystore password stays out of files); Spark gets them in a
    0600 properties file, not on a command line (framework/backfill/session.py)."""
    return expand_env(config_table(config_file, "spark"), f"--config {config_file} [spark]")


def registry_settings(config_file: str | None) -> RegistrySettings | None:
    """The `[registry]` table of a TOML config file (None without one): the Schema Registry's
    URL, subject strategy and client settings (auth, TLS), checked at start
    (framework/kafka/registry_settings.py)."""
    table = config_table(config_file, "registry")
    return parse_registry(table, f"--config {config_file} [registry]") if table else None


def config_table(config_file: str | None, name: str) -> dict[str, Any]:
    """Table `name` of a TOML config file ({} without a file or table)."""
    if config_file is None:
        return {}
    try:
        with open(config_file, "rb") as f:
            table = tomllib.load(f).get(name, {})
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PipelineError(f"--config {config_file}: {error}") from None
    if not isinstance(table, dict):
        raise PipelineError(f"--config {config_file}: [{name}] must be a table of settings")
    return table


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
) -> int:
    """Run the named computations (all when empty) until SIGTERM; returns an exit code.

    `instance_id` (every child gets the same: members and transactional ids are per
    computation, so they stay distinct) and `log_format` pass on to the children.

    With `metrics_port`, each process serves Prometheus metrics: one computation on that port;
    several on consecutive ports from it, in the order named (0: each a free port, logged), on
    `metrics_addr` (loopback unless chosen)."""
    pipeline = load_pipeline(ref)
    names = names or list(pipeline.computations)
    for name in names:
        pipeline[name]  # noqa: B018 - fails at start naming the computations there are
    kafka = kafka_settings(config_file)
    registry = registry_settings(config_file)
    if standby < 0:
        raise PipelineError(f"--standby {standby}: give a number of partitions >= 0")
    tuning = {"standby": standby, "instance_id": instance_id}
    if commit_interval_ms is not None:
        if commit_interval_ms <= 0:
            raise PipelineError(f"--commit-interval-ms {commit_interval_ms}: give milliseconds > 0")
        tuning["commit_interval_ms"] = commit_interval_ms
    if len(names) == 1:
        if metrics_port is not None:
            serve(metrics_port, metrics_addr)
        return _run_one(pipeline, names[0], bootstrap, state_dir, kafka, registry, tuning)
    options = {
        "--commit-interval-ms": commit_interval_ms,
        "--standby": standby or None,
        "--instance-id": instance_id,
        "--log-format": log_format,
        "--metrics-addr": metrics_addr,
    }
    return _supervise(ref, names, bootstrap, state_dir, config_file, options, metrics_port)


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
        **tuning,
    )
    runner.run(stop)
    return 0


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _supervise(
    ref: str,
    names: list[str],
    bootstrap: str,
    state_dir: Path,
    config_file: str | None,
    options: dict[str, object],
    metrics_port: int | None,
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
        return [*base, "--computation", name, *port]

    children = {
        name: subprocess.Popen(args(i, name), preexec_fn=_die_with_parent)
        for i, name in enumerate(names)
    }

    def forward(signum, _frame):
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
        if rc != 0 and code == 0:
            log.error("computation %s exited with %d; stopping the others", name, rc)
            code = rc if rc > 0 else 1
            forward(signal.SIGTERM, None)
    return code
