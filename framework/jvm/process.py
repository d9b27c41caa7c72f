"""What a local JVM part asks of the machine: Java, processes, ports, small state files and a
lock on its home.

The embedded broker and the embedded Schema Registry are both Java processes that logwheel
starts detached, finds again by pid file, and stops; what they ask the operating system is
the same, so it lives here, below both (they may not import each other), and their lifecycle
above it (`service.py`).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import random
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import psutil

from framework.errors import ConfigurationError
from framework.private_files import private_dir

MIN_JAVA = 17
N = TypeVar("N", int, float)


def find_java(needed_by: str) -> str:
    """The java executable, checked to be Java 17 or newer; `needed_by` names the part in the
    error ("Kafka needs Java 17+")."""
    java = shutil.which("java")
    fix = "install Java 17+ (apt-get install openjdk-17-jre-headless)"
    if java is None:
        raise ConfigurationError(f"no `java` on PATH: {fix}")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ConfigurationError(f"`{java} -version` failed ({err}): {fix}") from err
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    major = int(found.group(1)) if found else 0
    if found and major == 1:  # "1.8.0_292" is Java 8
        major = int(found.group(2) or 0)
    if major < MIN_JAVA:
        seen = f"Java {major}" if found else "an unknown Java"
        raise ConfigurationError(f"{java} is {seen}; {needed_by} needs Java {MIN_JAVA}+: {fix}")
    return java


# -- processes ----------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not; our own exited children are reaped)."""
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def argv(pid: int) -> list[str]:
    """The command line of `pid`, argument by argument ([] if unknown)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").rstrip("\0").split("\0") if raw else []


def owner(pid: int) -> int | None:
    """The uid `pid` runs under (None if it is gone)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to `timeout` s for `pid` to exit; whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return not alive(pid)


# -- ports --------------------------------------------------------------------------------


def port_free(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:port (TIME_WAIT leftovers do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def any_free_port(avoid: int = 0) -> int:
    """A free port below the kernel's ephemeral range: a port the kernel hands out could be
    taken by any client's outgoing connection while the JVM starts or restarts (seen as a
    broker that exits at start, its port in use)."""
    low = ephemeral_low()
    rng = random.Random()
    while True:
        port = rng.randrange(min(10_000, low // 2), low)
        if port != avoid and port_free(port):
            return port


def ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The lowest port of the kernel's ephemeral range."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def accepts(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def listeners(port: int) -> list[int | None]:
    """The holders (pids) of the sockets listening where a connection to 127.0.0.1:`port`
    lands: bound to 127.0.0.1 or a wildcard address, in IPv4 or IPv6-mapped form (a JVM binds
    127.0.0.1 as ::ffff:127.0.0.1). None for a holder the kernel does not name: another
    user's, when we are not root."""
    for _ in range(2):
        holders = [
            conn.pid
            for conn in psutil.net_connections(kind="tcp")
            if conn.status == psutil.CONN_LISTEN
            and conn.laddr.port == port
            and _reaches_loopback(conn.laddr.ip)
        ]
        # psutil maps sockets to processes before it reads the socket table: a socket bound
        # in between (a JVM starting) has no holder yet, and the next look names it.
        if None not in holders:
            break
    return holders


def _reaches_loopback(address: str) -> bool:
    """Whether a socket bound to `address` receives connections to 127.0.0.1."""
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ip.ipv4_mapped or ip
    return ip.is_unspecified or ip == ipaddress.IPv4Address("127.0.0.1")


# -- state files --------------------------------------------------------------------------


def read_number(path: Path, kind: type[N]) -> N | None:
    """The number a pid or time file holds; None if it is missing or garbled."""
    try:
        return kind(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_json(path: Path) -> dict | None:
    """The JSON object a small state file holds; None if it is missing or garbled."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class HomeLock:
    """An exclusive lock on a server's home directory, re-entrant within its owner: two
    processes that start the same broker or registry at once must not spawn two JVMs on one
    home. `with lock():` holds it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._depth = 0
        self._fd: int | None = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        if self._depth == 0:
            private_dir(self.home)  # Kafka's data, SCRAM keys, schemas: the owner's alone
            self._fd = os.open(self.home / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self._fd is not None:
                os.close(self._fd)  # closing releases the flock
                self._fd = None
