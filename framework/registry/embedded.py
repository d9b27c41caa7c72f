"""The embedded Schema Registry: Apicurio Registry run as a local Java process.

Jobs that read or write the Confluent wire format need a real registry, and a developer or a
test should get one with one command and no Docker, as with the broker. `Registry(home)` keeps
everything it owns under one directory: `data/` (the H2 database with the schemas),
`port` (chosen at the first start and reused, so the URL stays the same), `registry.pid` and
`registry.log` (the JVM's output). How the JVM is run is in `settings.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from framework.files import PRIVATE_UMASK, private_dir
from framework.jvm.jars import registry_jar
from framework.jvm.process import (
    HomeLock,
    alive,
    any_free_port,
    cmdline,
    find_java,
    find_process,
    port_free,
    read_number,
    terminate,
)
from framework.registry.readiness import answers
from framework.registry.settings import (
    RegistryError,
    api_url,
    choose_port,
    is_registry_of,
    jvm_command,
)

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
LOG_ROTATE_BYTES = 20_000_000


@dataclass(frozen=True)
class Started:
    """The outcome of `Registry.start`."""

    url: str
    started: bool  # False when it was already running
    seconds: float
    pid: int


def default_home() -> Path:
    """`LOGWHEEL_REGISTRY_DIR`, or `.logwheel/registry` under the current directory."""
    return Path(os.environ.get("LOGWHEEL_REGISTRY_DIR") or ".logwheel/registry")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Registry:
    """One embedded registry, identified by its home directory."""

    def __init__(self, home: Path | str) -> None:
        self.home = Path(home).resolve()
        self.data_dir = self.home / "data"
        self.port_file = self.home / "port"
        self.pid_file = self.home / "registry.pid"
        self.log_file = self.home / "registry.log"
        self.lock = HomeLock(self.home)

    # -- queries ------------------------------------------------------------------------

    def running_pid(self, say: Callable[[str], None] | None = None) -> int | None:
        """The pid of this home's registry process. With `say`, a stale pid file is removed
        (and said so) and a running registry whose pid file was lost is adopted."""
        pid = read_number(self.pid_file, int)
        if pid is not None and self._is_ours(pid):
            return pid
        if say is not None and pid is not None:
            say(f"note: removed a stale pid file ({self.pid_file}: pid {pid} is not its registry)")
            self.pid_file.unlink(missing_ok=True)
        orphan = find_process(lambda command: is_registry_of(command, self.home))
        if orphan is not None and say is not None:
            say(f"note: adopting registry pid {orphan}, which had lost its pid file")
            self.pid_file.write_text(f"{orphan}\n")
        return orphan

    def port(self) -> int | None:
        """The port chosen at the last start, if any."""
        return read_number(self.port_file, int)

    def url(self) -> str | None:
        """The Confluent-compatible API's URL of the last start, if any."""
        port = self.port()
        return api_url(port) if port else None

    def status(self) -> str | None:
        """The URL when the registry runs and its API answers, else None."""
        url = self.url()
        if url and self.running_pid() and answers(url):
            return url
        return None

    # -- start / stop -------------------------------------------------------------------

    def start(
        self, timeout: float = START_TIMEOUT_S, say: Callable[[str], None] = _stderr
    ) -> Started:
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
                terminate(pid, STOP_TIMEOUT_S, "registry")
            java = find_java("the Schema Registry (Apicurio Registry)")
            jar = registry_jar()
            began = time.monotonic()
            port, note = choose_port(
                os.environ.get("LOGWHEEL_REGISTRY_PORT"), self.port(), port_free, any_free_port
            )
            if note:
                say(f"note: {note}")
            self.port_file.write_text(f"{port}\n")
            pid = self._spawn(java, jar, port)
            say(f"starting the Schema Registry in {self.home} (pid {pid}, log {self.log_file}) ...")
            url = api_url(port)
            self._wait_ready(pid, url, timeout, began)
            return Started(url, True, time.monotonic() - began, pid)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Stop the registry (SIGTERM, then SIGKILL after `timeout` s); its pid, or None."""
        with self.lock():
            pid = self.running_pid()
            if pid is not None:
                terminate(pid, timeout, "registry")
            self.pid_file.unlink(missing_ok=True)
            return pid

    # -- the steps of a start -----------------------------------------------------------

    def _spawn(self, java: str, jar: Path, port: int) -> int:
        """Start the JVM detached from this process (own session, output to its log)."""
        private_dir(self.data_dir)
        if self.log_file.exists() and self.log_file.stat().st_size > LOG_ROTATE_BYTES:
            self.log_file.replace(self.log_file.with_suffix(".log.1"))
        extra = os.environ.get("LOGWHEEL_REGISTRY_JVM_OPTS", "").split()
        command = jvm_command(java, jar, self.home, port, extra)
        with open(self.log_file, "ab") as out:
            process = subprocess.Popen(
                command,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                umask=PRIVATE_UMASK,
            )
        self.pid_file.write_text(f"{process.pid}\n")
        return process.pid

    def _wait_ready(self, pid: int, url: str, timeout: float, began: float) -> None:
        """Wait until the API at `url` answers, up to `timeout` s after `began`; a JVM that
        exits or never answers is an error that names its log (one that never answered is
        stopped)."""
        deadline = began + timeout
        while time.monotonic() < deadline:
            if not alive(pid):
                self.pid_file.unlink(missing_ok=True)
                raise RegistryError(
                    f"the registry exited while starting ({self._last_error()}); "
                    f"see {self.log_file}"
                )
            if answers(url):
                return
            time.sleep(0.2)
        self.stop()
        raise RegistryError(
            f"the registry did not answer on {url} within {timeout:.0f}s; see {self.log_file}"
        )

    def _last_error(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()[-200:]
        except OSError:
            return "no log"
        errors = [line for line in lines if " ERROR " in line or "Exception" in line]
        return (errors or lines or ["no log output"])[-1].strip()[:300]

    def _is_ours(self, pid: int) -> bool:
        return alive(pid) and is_registry_of(cmdline(pid), self.home)
