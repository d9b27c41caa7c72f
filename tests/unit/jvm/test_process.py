"""What a local JVM part asks of the machine, on the real machine: Java's version, processes
(alive, command line, owner, exit), ports, small state files and the home's lock."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framework.errors import ConfigurationError
from framework.jvm import process
from framework.jvm.process import HomeLock

LIVENESS_S = 30.0
"""A bound on a child's start or exit on a loaded machine; never a measure of speed."""


def _fake_java(tmp_path: Path, version_line: str) -> Path:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java.parent


def test_java_8_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(_fake_java(tmp_path, 'java version "1.8.0_292"')))
    with pytest.raises(ConfigurationError, match=r"Java 8; Kafka needs Java 17\+.*install"):
        process.find_java("Kafka")


def test_java_21_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(_fake_java(tmp_path, 'openjdk version "21.0.2" 2024-01-16')))
    assert process.find_java("Kafka").endswith("/java")


def test_a_java_that_does_not_say_its_version_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(_fake_java(tmp_path, "hello")))
    with pytest.raises(ConfigurationError, match="an unknown Java; the registry needs"):
        process.find_java("the registry")


def test_no_java_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="apt-get install openjdk-17-jre-headless"):
        process.find_java("Kafka")


def test_a_child_runs_until_it_exits_and_is_then_reaped():
    child = subprocess.Popen(["sleep", "600"])
    try:
        assert process.alive(child.pid)
        assert not process.wait_exit(child.pid, 0.2)
    finally:
        child.kill()
    assert process.wait_exit(child.pid, LIVENESS_S)  # a zombie child counts as gone
    assert not process.alive(child.pid)


def _exec_done(child: subprocess.Popen) -> subprocess.Popen:
    """`child` once its command line shows: Popen returns as soon as the exec has begun, and
    for a moment the kernel shows an empty one."""
    deadline = time.monotonic() + LIVENESS_S
    while not process.argv(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return child


def test_the_command_line_comes_argument_by_argument(tmp_path):
    """A home with a space in its path is one argument, not two."""
    command = ["sh", "-c", "sleep 600; :", f"--home={tmp_path}/my home", "-x"]
    child = _exec_done(subprocess.Popen(command))
    try:
        assert process.argv(child.pid) == command
        assert process.owner(child.pid) == os.getuid()
    finally:
        child.kill()
        child.wait(LIVENESS_S)
    assert process.argv(child.pid) == [] and process.owner(child.pid) is None


def test_a_port_listened_on_is_not_free_and_accepts():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert not process.port_free(port) and process.accepts(port)
    assert process.port_free(port) and not process.accepts(port)


@pytest.mark.parametrize(
    ("family", "address", "reached"),
    [
        (socket.AF_INET, "127.0.0.1", True),
        (socket.AF_INET, "0.0.0.0", True),
        (socket.AF_INET6, "::ffff:127.0.0.1", True),  # how a JVM binds 127.0.0.1
        (socket.AF_INET6, "::", True),
        (socket.AF_INET, "127.0.0.2", False),
        (socket.AF_INET6, "::1", False),
    ],
)
def test_the_listener_of_a_loopback_port_is_found_with_its_owner(family, address, reached):
    """What answers a connection to 127.0.0.1:port, and which process holds it; a client
    socket is not a listener."""
    if family == socket.AF_INET6 and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    with socket.socket(family) as server:
        server.bind((address, 0))
        server.listen()
        port = server.getsockname()[1]
        found = process.listeners(port)
        if not reached:
            assert found == []
            return
        assert found == [os.getpid()]
        with socket.create_connection(("127.0.0.1", port)) as client:
            assert process.listeners(port) == found  # its connection is not listed
            assert client.getpeername()[1] == port
    assert process.listeners(port) == []  # closed


def test_chosen_ports_lie_below_the_ephemeral_range(tmp_path):
    """A port in the kernel's ephemeral range may be taken by a client's outgoing connection
    while the JVM starts."""
    assert process.ephemeral_low() > 10_000
    ports = [process.any_free_port() for _ in range(50)]
    assert all(port < process.ephemeral_low() for port in ports)
    (tmp_path / "range").write_text("20000\t60999\n")
    assert process.ephemeral_low(tmp_path / "range") == 20000
    (tmp_path / "range").write_text("garbled\n")
    assert process.ephemeral_low(tmp_path / "range") == 32768


def test_a_port_to_avoid_is_never_chosen(monkeypatch):
    low = process.ephemeral_low()
    candidates = iter([low - 1, low - 1, low - 2])
    monkeypatch.setattr(process.random.Random, "randrange", lambda self, a, b: next(candidates))
    assert process.any_free_port(avoid=low - 1) == low - 2


def test_a_missing_or_garbled_state_file_reads_as_nothing(tmp_path):
    pid, ports = tmp_path / "x.pid", tmp_path / "ports.json"
    assert process.read_number(pid, int) is None and process.read_json(ports) is None
    pid.write_text("12ab\n")
    ports.write_text("{not json")
    assert process.read_number(pid, int) is None and process.read_json(ports) is None
    pid.write_text(" 4242\n")
    ports.write_text(json.dumps({"port": 1}))
    assert process.read_number(pid, int) == 4242 and process.read_json(ports) == {"port": 1}
    assert process.read_number(pid, float) == 4242.0


TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(1)
"""


def _another_process_gets(lock_file: Path) -> bool:
    done = subprocess.run([sys.executable, "-c", TRY_LOCK, str(lock_file)], timeout=LIVENESS_S)
    return done.returncode == 0


def test_the_home_lock_excludes_other_processes_and_is_reentrant(tmp_path):
    home = tmp_path / "a" / "home"
    lock = HomeLock(home)
    with lock():
        assert stat.S_IMODE(home.stat().st_mode) == 0o700  # Kafka's data: the owner's alone
        with lock():  # a start calls stop, which takes the lock again
            assert not _another_process_gets(home / ".lock")
        assert not _another_process_gets(home / ".lock")  # still held by the outer block
    assert _another_process_gets(home / ".lock")
