"""The lifecycle of a JVM service that logwheel runs detached from the command that started it:
its pid file, start, readiness, stop and kill, and how a running process is known to be it.

The embedded broker's JVMs (a combined node, or a broker and its controller, or each node of a
cluster) and the embedded Schema Registry are such services. Each is given what is its own —
the command line, when it is ready, its ports and the layout of its home — and leaves the rest
to `Service`.

A pid is trusted only when the process is provably this service's: it runs (a zombie does not)
under our uid, and its command line holds the service's `marks`, exact arguments one of which
names the home (a Kafka JVM's properties file, the registry's home property). The pid file lies
in the home, which only our uid may write. A pid file naming any other process is stale: it is
removed, and that process is never signalled. A process of this home whose pid file was lost
is adopted only if it also holds the socket listening on the port saved in the home: a command
line is text any process may carry, a listening socket the kernel gives one process.

What answers on the service's port is the service only when the socket listening there is held
by its pid (`listener`): a port is a number any local program may take while the service starts
or after it stopped, and a client would then hand it its data, or take its schemas. Linux only
(/proc).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from framework.jvm.process import (
    alive,
    argv,
    listeners,
    owner,
    read_number,
    wait_exit,
)
from framework.private_files import PRIVATE_UMASK

LOG_ROTATE_BYTES = 20_000_000
"""A service's log past this size is moved to `<log>.1` at its next start."""
KILL_WAIT_S = 60.0
"""How long a SIGKILLed process may take to be gone. It is certain to go, but on a loaded
machine a JVM's hundred threads wait their turn to die: a stop that returned sooner would leave
a dying process with the home's marks, which the next start would adopt and wait for."""
ERROR_LINE = re.compile(r"\bERROR\b|Exception")

log = logging.getLogger(__name__)
Say = Callable[[str], None]


@dataclass(frozen=True)
class Started:
    """The outcome of a service's start: the address clients use (a bootstrap address, a URL),
    whether this call started it (False when it ran already), how long it took, its pid."""

    address: str
    started: bool
    seconds: float
    pid: int


def say_to_stderr(message: str) -> None:
    """How a start tells the user what it does, by default: a line on stderr (the last line of
    stdout is the address alone)."""
    print(message, file=sys.stderr, flush=True)


def home_from_env(variable: str, default: str) -> Path:
    """The home named by the environment `variable`, else `default` under the current
    directory."""
    return Path(os.environ.get(variable) or default)


class Service:
    """One detached JVM of a home (see the module doc). `name` is how messages call it ("the
    broker", "Kafka node 2"); `port` reads the port it listens on from its home (None before
    its first start); `error` the exception a failed start raises (a `ConfigurationError` of
    its package); `redact` takes secrets out of a log line."""

    def __init__(
        self,
        name: str,
        home: Path,
        pid_file: Path,
        log_file: Path,
        marks: Sequence[str],
        port: Callable[[], int | None],
        error: type[Exception],
        redact: Callable[[str], str] = str,
    ) -> None:
        self.name = name
        self.home = home
        self.pid_file = pid_file
        self.log_file = log_file
        self.marks = tuple(marks)
        self.port = port
        self.error = error
        self.redact = redact

    def is_ours(self, pid: int) -> bool:
        """Whether `pid` runs this service: alive, under our uid, its command line holding
        every mark."""
        if not alive(pid) or owner(pid) != os.getuid():
            return False
        arguments = argv(pid)
        return all(mark in arguments for mark in self.marks)

    def listener(self, pid: int) -> bool | None:
        """Who listens on 127.0.0.1 at this service's port: `pid` (True), another program
        (False), or nothing yet (None: a JVM still starting, or no port saved)."""
        port = self.port()
        holders = listeners(port) if port else []
        if not holders:
            return None
        return all(holder == pid for holder in holders)

    def serves(self, pid: int) -> bool:
        """Whether what answers on this service's port is `pid`, this service's process."""
        return self.listener(pid) is True

    def port_taken(self, pid: int) -> str | None:
        """When another program listens on this service's port instead of `pid`: a one-line
        error naming it and the fix; else None."""
        if self.listener(pid) is not False:
            return None
        port = self.port()
        others = sorted({str(h) for h in listeners(port or 0) if h is not None and h != pid})
        return (
            f"127.0.0.1:{port} is held by another program (pid {', '.join(others) or 'unknown'}), "
            f"not {self.name} (pid {pid}): stop that program, then start {self.name} again"
        )

    def pid(self, say: Say | None = None) -> int | None:
        """The pid of this service's running process, or None. With `say`, a stale pid file is
        removed (and said so) and a running process of this home whose pid file was lost is
        adopted: its pid written to the pid file."""
        pid = read_number(self.pid_file, int)
        if pid is not None and self.is_ours(pid):
            return pid
        if pid is not None and say is not None:
            other = " ".join(argv(pid)) if alive(pid) else ""
            if other:
                say(
                    f"note: {self.pid_file} named pid {pid}, which is now another program "
                    f"({other[:60]}); ignoring that stale pid file"
                )
            else:
                say(f"note: removed a stale pid file ({self.pid_file}: pid {pid} is gone)")
            self.pid_file.unlink(missing_ok=True)
        orphan = self._find_orphan()
        if orphan is not None and say is not None:
            say(f"note: adopting {self.name} pid {orphan}, which had lost its pid file")
            self.pid_file.write_text(f"{orphan}\n")
        return orphan

    def spawn(self, command: list[str]) -> int:
        """Start `command` detached from this process (a session of its own, run in the home,
        output appended to the log, umask 077: what it writes is the owner's alone) and write
        its pid file; its pid."""
        if self.log_file.exists() and self.log_file.stat().st_size > LOG_ROTATE_BYTES:
            self.log_file.replace(self.log_file.with_name(self.log_file.name + ".1"))
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

    def stop(self, timeout: float) -> int | None:
        """SIGTERM the process (a JVM then runs its shutdown hooks: a clean close of its
        files), SIGKILL it if it still runs `timeout` s later; the pid it had, or None."""
        return stop_together([self], timeout)[0]

    def kill(self) -> int | None:
        """SIGKILL the process, as a crash would; the pid it had, or None."""
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_exit(pid, KILL_WAIT_S)
        self.pid_file.unlink(missing_ok=True)
        return pid

    def last_error(self) -> str:
        """The log's last error line (else its last line), redacted, for a one-line message."""
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()[-200:]
        except OSError:
            return "no log"
        errors = [line for line in lines if ERROR_LINE.search(line)]
        return self.redact((errors or lines or ["no log output"])[-1].strip()[:300])

    def _find_orphan(self) -> int | None:
        """A process of this home that lost its pid file: ours by uid and marks, and holding
        the listening socket of the port saved in the home."""
        proc = Path("/proc")
        if not proc.is_dir():
            return None
        pids = (int(entry.name) for entry in proc.iterdir() if entry.name.isdigit())
        return next((pid for pid in pids if self.is_ours(pid) and self.serves(pid)), None)


def stop_together(services: Sequence[Service], timeout: float) -> list[int | None]:
    """Stop several services at once (a cluster's nodes): SIGTERM to each, then SIGKILL to
    those still running `timeout` s later; each one's pid file removed; the pids they had."""
    pids = [service.pid() for service in services]
    for pid in filter(None, pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for service, pid in zip(services, pids, strict=True):
        if pid is not None and not wait_exit(pid, max(0.0, deadline - time.monotonic())):
            what = service.name
            log.warning("%s (pid %d) still ran %.1fs after SIGTERM; killing it", what, pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_exit(pid, KILL_WAIT_S)
        service.pid_file.unlink(missing_ok=True)
    return pids


def await_ready(
    watched: Mapping[Service, int],
    ready: Callable[[], bool],
    deadline: float,
    interval: float = 0.2,
) -> bool:
    """Wait until `ready()` says so, up to `deadline` (monotonic); whether it did. A watched
    process that exits meanwhile ends the wait with its service's error, which quotes its log's
    last error line and names the log (its pid file is removed)."""
    while time.monotonic() < deadline:
        for service, pid in watched.items():
            if not alive(pid):
                service.pid_file.unlink(missing_ok=True)
                raise service.error(
                    f"{service.name} exited while starting ({service.last_error()}); "
                    f"see {service.log_file}"
                )
        if ready():
            return True
        time.sleep(interval)
    return False
