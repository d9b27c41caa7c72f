"""The embedded Schema Registry: Apicurio Registry run as a local Java process.

Jobs that read or write the Confluent wire format need a real registry, and a developer or a
test should get one with one command and no Docker, as with the broker. `Registry(home)` keeps
everything it owns under one directory: `data/` (the H2 database with the schemas),
`port` (chosen at the first start and reused, so the URL stays the same), `registry.pid` and
`registry.log` (the JVM's output). How the JVM is run is in `settings.py`; its lifecycle (pid
file, start, stop, which process is ours) in `framework/jvm/service.py`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from framework.jvm.jars import registry_jar
from framework.jvm.process import HomeLock, any_free_port, find_java, port_free, read_number
from framework.jvm.service import Say, Service, Started, await_ready, home_from_env, say_to_stderr
from framework.private_files import private_dir
from framework.registry.readiness import answers
from framework.registry.settings import RegistryError, api_url, choose_port, home_mark, jvm_command

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def default_home() -> Path:
    """`LOGWHEEL_REGISTRY_DIR`, or `.logwheel/registry` under the current directory."""
    return home_from_env("LOGWHEEL_REGISTRY_DIR", ".logwheel/registry")


class Registry:
    """One embedded registry, identified by its home directory."""

    def __init__(self, home: Path | str) -> None:
        self.home = Path(home).resolve()
        self.data_dir = self.home / "data"
        self.port_file = self.home / "port"
        self.pid_file = self.home / "registry.pid"
        self.log_file = self.home / "registry.log"
        self.lock = HomeLock(self.home)
        self.jvm = Service(
            "the registry",
            self.home,
            self.pid_file,
            self.log_file,
            [home_mark(self.home)],
            self.port,
            RegistryError,
        )

    # -- queries ------------------------------------------------------------------------

    def running_pid(self, say: Say | None = None) -> int | None:
        """The pid of this home's registry process. With `say`, a stale pid file is removed
        (and said so) and a running registry whose pid file was lost is adopted."""
        return self.jvm.pid(say)

    def port(self) -> int | None:
        """The port chosen at the last start, if any."""
        return read_number(self.port_file, int)

    def url(self) -> str | None:
        """The Confluent-compatible API's URL of the last start, if any."""
        port = self.port()
        return api_url(port) if port else None

    def status(self) -> str | None:
        """The URL when the registry runs and its API answers, on a port its own process
        listens on (not another program that took the port), else None."""
        url, pid = self.url(), self.running_pid()
        if url and pid and self.jvm.serves(pid) and answers(url):
            return url
        return None

    # -- start / stop -------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S, say: Say = say_to_stderr) -> Started:
        """Start the registry unless it runs, and wait until its API answers; idempotent.
        A first start may build the registry's jar first (framework/jvm/jars.py); `timeout`
        counts from when the JVM is started."""
        began = time.monotonic()
        with self.lock():
            pid = self.running_pid(say)
            url = self.url()
            if pid is not None and url is not None:
                self._wait_ready(pid, url, timeout, began)
                return Started(url, False, time.monotonic() - began, pid)
            if pid is not None:  # running, but its port file is gone: it cannot be reached
                self.jvm.stop(STOP_TIMEOUT_S)
            java = find_java("the Schema Registry (Apicurio Registry)")
            jar = registry_jar()
            began = time.monotonic()
            port, note = choose_port(
                os.environ.get("LOGWHEEL_REGISTRY_PORT"), self.port(), port_free, any_free_port
            )
            if note:
                say(f"note: {note}")
            self.port_file.write_text(f"{port}\n")
            private_dir(self.data_dir)
            extra = os.environ.get("LOGWHEEL_REGISTRY_JVM_OPTS", "").split()
            pid = self.jvm.spawn(jvm_command(java, jar, self.home, port, extra))
            say(f"starting the Schema Registry in {self.home} (pid {pid}, log {self.log_file}) ...")
            url = api_url(port)
            self._wait_ready(pid, url, timeout, began)
            return Started(url, True, time.monotonic() - began, pid)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Stop the registry (SIGTERM, then SIGKILL after `timeout` s); its pid, or None."""
        with self.lock():
            return self.jvm.stop(timeout)

    def _wait_ready(self, pid: int, url: str, timeout: float, began: float) -> None:
        """Wait until the API at `url` answers from a port the JVM `pid` listens on, up to
        `timeout` s after `began`; a JVM that exits, never answers or whose port another program
        holds is an error that names its log or that program (one that did not exit is
        stopped)."""

        def ready() -> bool:
            taken = self.jvm.port_taken(pid)
            if taken is not None:  # whatever answers there is not this registry
                self.stop()
                raise RegistryError(taken)
            return self.jvm.serves(pid) and answers(url)

        if await_ready({self.jvm: pid}, ready, began + timeout):
            return
        self.stop()
        raise RegistryError(
            f"the registry did not answer on {url} within {timeout:.0f}s; see {self.log_file}"
        )
