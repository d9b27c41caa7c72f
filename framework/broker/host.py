"""The machine an embedded broker runs on: Java, processes, ports and the broker's files —
everything `Broker` asks the operating system."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import random
import re
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import TypeVar

from framework.broker.security import write_private
from framework.errors import ConfigurationError

MIN_JAVA = 17
N = TypeVar("N", int, float)
QUIET = logging.getLogger("logwheel.broker.librdkafka")
"""Where the broker's probing clients log: nowhere (a broker still starting refuses them)."""
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


class BrokerError(ConfigurationError):
    """A problem the user must fix; the message is one line that names the fix."""


def find_java() -> str:
    """The java executable, checked to be Java 17 or newer."""
    java = shutil.which("java")
    fix = "install Java 17+ (apt-get install openjdk-17-jre-headless)"
    if java is None:
        raise BrokerError(f"no `java` on PATH: {fix}")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BrokerError(f"`{java} -version` failed ({err}): {fix}") from err
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    major = int(found.group(1)) if found else 0
    if found and major == 1:  # "1.8.0_292" is Java 8
        major = int(found.group(2) or 0)
    if major < MIN_JAVA:
        seen = f"Java {major}" if found else "an unknown Java"
        raise BrokerError(f"{java} is {seen}; Kafka needs Java {MIN_JAVA}+: {fix}")
    return java


def cluster_id() -> str:
    """A random Kafka cluster id: 16 bytes, URL-safe base64 without padding, not led by '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# -- processes and ports ------------------------------------------------------------------


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


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return not alive(pid)


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
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def metadata_answers(bootstrap: str, settings: dict[str, str]) -> bool:
    """Whether the broker serves metadata and has registered itself (it is unfenced)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**settings, "bootstrap.servers": bootstrap, "logger": QUIET})
    try:
        return bool(admin.list_topics(timeout=2).brokers)
    except KafkaException:
        return False


def write_properties(path: Path, settings: dict[str, str]) -> None:
    lines = [f"{k}={v}" for k, v in settings.items()]
    # 0600: a secure broker's file holds the key stores' and its own user's passwords
    write_private(path, "# written by logwheel at every start\n" + "\n".join(lines))


def read_number(path: Path, kind: type[N]) -> N | None:
    """The number a pid or time file holds; None if it is missing or garbled."""
    try:
        return kind(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
