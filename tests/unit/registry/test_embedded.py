"""The embedded registry's lifecycle: start, idempotent start, status, stop, a JVM that dies
at start, a lost port file, a stale pid file. A small HTTP server (`fakes.py`) stands in for
Apicurio's JVM; the real registry runs in tests/integration/test_registry.py."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import pytest

from framework.jvm.process import alive, any_free_port
from framework.registry import embedded
from framework.registry.embedded import Registry
from framework.registry.readiness import answers
from framework.registry.settings import RegistryError, api_url
from tests.support_impostor import end

FAKES = Path(__file__).with_name("fakes.py")
TIMEOUT_S = 60.0
"""Liveness bound for the stand-in to answer on a loaded machine; never a measure of speed."""


@pytest.fixture
def java(tmp_path, monkeypatch) -> Path:
    """A `java` on PATH that says it is Java 21 and runs the stand-in registry."""
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -version ]; then echo \'openjdk version "21.0.2"\' >&2; exit 0; fi\n'
        f'exec {sys.executable} {FAKES} "$@"\n'
    )
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{java.parent}:/usr/bin:/bin")
    monkeypatch.setattr(embedded, "registry_jar", lambda: tmp_path / "registry-runner.jar")
    monkeypatch.setenv("LOGWHEEL_REGISTRY_PORT", str(any_free_port()))
    monkeypatch.delenv("LOGWHEEL_REGISTRY_JVM_OPTS", raising=False)
    return java


@pytest.fixture
def registry(tmp_path, java):
    registry = Registry(tmp_path / "registry")
    yield registry
    registry.stop(timeout=TIMEOUT_S)


def test_a_start_waits_for_the_api_and_a_second_start_finds_it_running(registry):
    said: list[str] = []
    first = registry.start(timeout=TIMEOUT_S, say=said.append)
    assert first.started and first.address == registry.url() == api_url(registry.port())
    assert answers(first.address) and registry.status() == first.address
    assert said == [
        f"starting the Schema Registry in {registry.home} (pid {first.pid}, "
        f"log {registry.log_file}) ..."
    ]
    assert registry.pid_file.read_text() == f"{first.pid}\n"
    assert stat.S_IMODE(registry.data_dir.stat().st_mode) == 0o700
    again = registry.start(timeout=TIMEOUT_S, say=said.append)
    assert not again.started and (again.pid, again.address) == (first.pid, first.address)
    assert len(said) == 1


def test_a_stop_ends_the_process_and_the_status_says_so(registry):
    pid = registry.start(timeout=TIMEOUT_S, say=lambda _: None).pid
    assert registry.stop(timeout=TIMEOUT_S) == pid
    assert not alive(pid) and not registry.pid_file.exists()
    assert registry.status() is None and registry.running_pid() is None
    assert registry.stop() is None


def test_a_restart_keeps_the_url(registry, monkeypatch):
    url = registry.start(timeout=TIMEOUT_S, say=lambda _: None).address
    registry.stop(timeout=TIMEOUT_S)
    monkeypatch.delenv("LOGWHEEL_REGISTRY_PORT")  # the saved port is wanted next
    assert registry.start(timeout=TIMEOUT_S, say=lambda _: None).address == url


def test_a_registry_that_exits_while_starting_fails_with_its_error_and_log(registry, monkeypatch):
    monkeypatch.setenv("FAKE_REGISTRY_EXIT", "Failed to start: database is locked")
    message = r"the registry exited while starting \(ERROR Failed to start: database is locked\)"
    with pytest.raises(RegistryError, match=message + r"; see .*registry\.log"):
        registry.start(timeout=TIMEOUT_S, say=lambda _: None)
    assert not registry.pid_file.exists()


def test_a_registry_whose_port_file_was_lost_is_replaced(registry):
    """It cannot be reached at a known URL: it is stopped and a new one started."""
    old = registry.start(timeout=TIMEOUT_S, say=lambda _: None).pid
    registry.port_file.unlink()
    new = registry.start(timeout=TIMEOUT_S, say=lambda _: None)
    assert new.started and new.pid != old and not alive(old)


def test_another_program_answering_on_its_port_is_not_taken_for_the_registry(registry, monkeypatch):
    """Another program takes the port while the JVM starts and answers `GET /subjects` as the
    registry would: the start fails in one line naming it (its JVM stopped, that program never
    signalled), the status does not give its URL, and the next start moves to a free port."""
    monkeypatch.setenv("FAKE_REGISTRY_IMPOSTOR", "1")
    port = int(os.environ["LOGWHEEL_REGISTRY_PORT"])
    try:
        with pytest.raises(RegistryError) as refused:
            registry.start(timeout=TIMEOUT_S, say=lambda _: None)
        impostor = int((registry.home / "impostor.pid").read_text())
        assert answers(api_url(port))  # what a check of the answer alone would take for it
        message = str(refused.value)
        assert re.fullmatch(
            rf"127\.0\.0\.1:{port} is held by another program \(pid {impostor}\), not the "
            r"registry \(pid \d+\): stop that program, then start the registry again",
            message,
        ), message
        assert registry.running_pid() is None and alive(impostor)
        assert registry.status() is None
        monkeypatch.delenv("FAKE_REGISTRY_IMPOSTOR")
        said: list[str] = []
        again = registry.start(timeout=TIMEOUT_S, say=said.append)
        assert again.started and registry.port() != port and registry.status() == again.address
        assert f"port {port} (LOGWHEEL_REGISTRY_PORT) is taken" in said[0]
    finally:
        if (registry.home / "impostor.pid").exists():
            end(int((registry.home / "impostor.pid").read_text()))


def test_a_stale_pid_file_is_removed_and_said(tmp_path):
    registry = Registry(tmp_path)
    registry.pid_file.write_text("999999999\n")
    said: list[str] = []
    assert registry.running_pid(said.append) is None
    assert not registry.pid_file.exists()
    assert "stale pid file" in said[0]


def test_its_process_is_known_by_an_argument_naming_its_home(tmp_path):
    registry = Registry(tmp_path / "r")
    assert registry.jvm.pid_file.parent == registry.home
    assert registry.jvm.marks == (f"-Dlogwheel.registry.home={registry.home}",)
