"""The lifecycle of a detached service, on real child processes (a Python sleeper stands in
for the JVM: what is under test is which process is trusted, started, waited for, signalled).

The adoption rules: a pid file is trusted only for a process of our uid whose command line
holds the service's marks (one naming the home); anything else is stale and never signalled.
A process that lost its pid file is adopted only if it also holds the socket listening on the
home's saved port; and what answers on that port is the service only when its pid holds that
socket (an impostor, tests/support_impostor.py, plays the program that took the port).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.errors import ConfigurationError
from framework.jvm import service as service_mod
from framework.jvm.process import alive, any_free_port, argv, read_number, wait_exit
from framework.jvm.service import Service, await_ready, home_from_env, stop_together
from tests.support_impostor import impostor

SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
SLEEPER += "print('started', flush=True); time.sleep(600)"
LISTENER = "import socket; s = socket.socket(); s.bind(('127.0.0.1', int(open('port').read()))); "
LISTENER += "s.listen(); " + SLEEPER
"""A sleeper that listens on the port saved in its home (its working directory), as a JVM
does on the port its start chose."""
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
STUBBORN += "print('started', flush=True); time.sleep(600)"
EXIT_S = 30.0
"""A liveness bound for a child to start or go on a loaded machine; never a measure of speed."""


class Refused(ConfigurationError):
    """The error the test service's failed start raises."""


def _service(home: Path, name: str = "the sleeper") -> Service:
    """A service whose port is saved in `port` in its home (a free one)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "port").write_text(f"{any_free_port()}\n")
    marks = ("logwheel.test.Sleeper", f"--home={home}")
    files = (home / "sleeper.pid", home / "sleeper.log")
    return Service(name, home, *files, marks, lambda: read_number(home / "port", int), Refused)


def _command(service: Service, code: str = SLEEPER) -> list[str]:
    return [sys.executable, "-c", code, *service.marks]


@pytest.fixture
def children() -> Iterator[list[int]]:
    """Pids of session leaders to SIGKILL at the end with their sessions, whatever the test
    did to them."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.killpg(pid, signal.SIGKILL)
            wait_exit(pid, EXIT_S)


def _foreign(children: list[int], *arguments: str, **popen) -> int:
    """A running process that is not the service's: the pid a stale pid file may name
    (`arguments` go on its command line)."""
    command = ["sh", "-c", "sleep 600; :", *arguments] if arguments else ["sleep", "600"]
    child = subprocess.Popen(command, start_new_session=True, **popen)
    children.append(child.pid)
    deadline = time.monotonic() + EXIT_S
    while not argv(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # exec'd: its command line shows
    return child.pid


def _started(service: Service, children: list[int], code: str = SLEEPER) -> int:
    pid = service.spawn(_command(service, code))
    children.append(pid)
    assert await_ready({service: pid}, lambda: "started" in _log(service), _deadline())
    return pid


def _log(service: Service) -> str:
    return service.log_file.read_text() if service.log_file.exists() else ""


def _deadline() -> float:
    return time.monotonic() + EXIT_S


def test_a_pid_file_naming_a_foreign_process_is_stale_and_that_process_is_never_signalled(
    tmp_path, children
):
    service = _service(tmp_path / "home")
    pid = _foreign(children)
    service.pid_file.write_text(f"{pid}\n")
    said: list[str] = []
    assert service.pid(said.append) is None
    assert "another program (sleep 600)" in said[0] and "stale pid file" in said[0]
    assert not service.pid_file.exists()
    service.pid_file.write_text(f"{pid}\n")
    assert service.stop(timeout=1) is None and service.kill() is None
    assert alive(pid)


def test_a_process_naming_another_home_is_not_ours(tmp_path, children):
    """Same program, same uid, but the command line names a home that only starts like ours."""
    mine, theirs = _service(tmp_path / "home"), _service(tmp_path / "home2")
    pid = _started(theirs, children)
    mine.pid_file.write_text(f"{pid}\n")
    assert mine.pid(lambda _: None) is None and mine.stop(timeout=1) is None
    assert alive(pid) and theirs.pid() == pid


def test_a_process_of_another_uid_is_not_ours(tmp_path, children, monkeypatch):
    """Its command line may name our home (anyone can write one): the uid decides."""
    service = _service(tmp_path / "home")
    pid = _started(service, children)
    assert service.pid() == pid
    monkeypatch.setattr(service_mod.os, "getuid", lambda: os.geteuid() + 1)
    said: list[str] = []
    assert service.pid(said.append) is None and "stale pid file" in said[0]
    service.pid_file.write_text(f"{pid}\n")
    assert service.stop(timeout=1) is None and service.kill() is None
    assert alive(pid)


@pytest.mark.skipif(os.geteuid() != 0, reason="running a child as another user needs root")
def test_a_real_process_of_another_user_naming_our_home_is_never_adopted(tmp_path, children):
    service = _service(tmp_path / "home")
    pid = _foreign(children, *service.marks, user=65534, group=65534)
    service.pid_file.write_text(f"{pid}\n")
    assert service.pid(lambda _: None) is None and service.kill() is None
    assert alive(pid)


@pytest.mark.skipif(os.geteuid() != 0, reason="running a child as another user needs root")
def test_another_users_process_holding_our_port_and_naming_our_home_is_never_adopted(
    tmp_path, children
):
    """Marks and the saved port, all but the uid: by pid file or as an orphan, it is not
    ours, and what answers on the port is named as another program, with its pid."""
    service = _service(tmp_path / "home")
    with impostor(service.port(), *service.marks, user=65534) as other:
        assert all(mark in argv(other) for mark in service.marks)
        service.pid_file.write_text(f"{other}\n")
        said: list[str] = []
        assert service.pid(said.append) is None and "stale pid file" in said[0]
        assert service.pid(said.append) is None and len(said) == 1  # no orphan adopted
        assert service.kill() is None and alive(other)
        mine = _started(service, children)  # a process of ours that never listens
        assert service.listener(mine) is False
        assert f"held by another program (pid {other}), not the sleeper (pid {mine})" in (
            service.port_taken(mine) or ""
        )


def test_a_gone_pid_is_stale(tmp_path):
    service = _service(tmp_path / "home")
    service.pid_file.write_text("999999999\n")
    said: list[str] = []
    assert service.pid(said.append) is None
    assert "pid 999999999 is gone" in said[0] and not service.pid_file.exists()


def test_our_process_whose_pid_file_was_lost_is_adopted(tmp_path, children):
    service = _service(tmp_path / "home")
    pid = _started(service, children, LISTENER)
    service.pid_file.unlink()
    assert service.pid() == pid and not service.pid_file.exists()  # no `say`: no side effect
    said: list[str] = []
    assert service.pid(said.append) == pid
    assert said == [f"note: adopting the sleeper pid {pid}, which had lost its pid file"]
    assert service.pid_file.read_text() == f"{pid}\n"


def test_a_process_of_ours_naming_our_home_but_not_holding_its_port_is_never_adopted(
    tmp_path, children
):
    """A command line is text: `grep -- --home=<home>`, or a JVM of this home that is not
    the one listening, carries the marks too. Only the process holding the saved port's
    listening socket is this home's service."""
    service = _service(tmp_path / "home")
    named = _foreign(children, *service.marks)  # our uid, every mark, no socket
    assert service.is_ours(named)
    said: list[str] = []
    assert service.pid(said.append) is None and said == []
    with impostor(service.port()):  # the port is held, by another process
        assert service.pid(said.append) is None and said == []
    assert service.kill() is None and alive(named)


def test_what_answers_on_the_port_is_the_service_only_when_its_process_holds_the_socket(
    tmp_path, children
):
    service = _service(tmp_path / "home")
    pid = _started(service, children)  # ours by pid file, listening on nothing
    assert service.listener(pid) is None and service.port_taken(pid) is None  # still starting
    with impostor(service.port()) as other:
        assert service.listener(pid) is False and not service.serves(pid)
        assert service.port_taken(pid) == (
            f"127.0.0.1:{service.port()} is held by another program (pid {other}), not "
            f"the sleeper (pid {pid}): stop that program, then start the sleeper again"
        )
    service = _service(tmp_path / "home2")
    pid = _started(service, children, LISTENER)
    assert service.listener(pid) is True and service.serves(pid)
    assert service.port_taken(pid) is None
    service.home.joinpath("port").write_text(f"{any_free_port()}\n")  # another port: not it
    assert service.listener(pid) is None and not service.serves(pid)


def test_spawn_detaches_the_process_and_keeps_what_it_writes_private(tmp_path, children):
    service = _service(tmp_path / "home")
    pid = _started(service, children, "open('made', 'w').close(); " + SLEEPER)
    assert service.pid_file.read_text() == f"{pid}\n"
    assert os.getsid(pid) == pid  # a session of its own: the terminal's ^C does not reach it
    made = service.home / "made"  # made in its working directory, the home, before it started
    assert stat.S_IMODE(made.stat().st_mode) == 0o600


def test_a_large_log_is_rotated_at_the_next_start(tmp_path, children, monkeypatch):
    service = _service(tmp_path / "home")
    monkeypatch.setattr(service_mod, "LOG_ROTATE_BYTES", 10)
    service.log_file.write_text("an old start's output\n")
    _started(service, children)
    assert (service.home / "sleeper.log.1").read_text() == "an old start's output\n"
    assert "old start" not in _log(service)


def test_stop_terminates_and_removes_the_pid_file(tmp_path, children):
    service = _service(tmp_path / "home")
    pid = _started(service, children)
    assert service.stop(timeout=EXIT_S) == pid
    assert not alive(pid) and not service.pid_file.exists()
    assert service.stop(timeout=EXIT_S) is None


def test_a_process_deaf_to_sigterm_is_killed_after_the_timeout(tmp_path, children):
    service = _service(tmp_path / "home")
    pid = _started(service, children, STUBBORN)
    assert service.stop(timeout=0.5) == pid
    assert not alive(pid)


def test_kill_is_a_sigkill(tmp_path, children):
    service = _service(tmp_path / "home")
    pid = _started(service, children, STUBBORN)  # SIGTERM would not end it
    assert service.kill() == pid
    assert not alive(pid) and not service.pid_file.exists()


def test_nodes_stop_together_each_signalled_before_any_is_killed(tmp_path, children, monkeypatch):
    """A cluster's nodes hand their leaderships over at once, under one timeout: every
    SIGTERM goes out before the first SIGKILL, not one node's timeout after the other's."""
    services = [_service(tmp_path / f"node-{i}", f"node {i}") for i in (1, 2, 3)]
    pids = [_started(s, children, STUBBORN) for s in services[:2]]
    sent = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if sig:  # not a probe of whether it runs
            sent.append((pid, sig))
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    assert stop_together(services, timeout=0.5) == [*pids, None]
    term, stop = signal.SIGTERM, signal.SIGKILL
    assert sent == [(pids[0], term), (pids[1], term), (pids[0], stop), (pids[1], stop)]
    assert not any(alive(pid) for pid in pids)
    assert not any(s.pid_file.exists() for s in services)


def test_a_process_that_exits_while_starting_fails_with_its_last_error(tmp_path, children):
    service = _service(tmp_path / "home")
    code = "print('INFO fine'); print('ERROR Address already in use: bind'); print('bye')"
    pid = service.spawn(_command(service, code))
    message = r"the sleeper exited while starting \(ERROR Address .*\); see .*sleeper\.log"
    with pytest.raises(Refused, match=message):
        await_ready({service: pid}, lambda: False, _deadline())
    assert not service.pid_file.exists()


def test_waiting_ends_when_ready_or_false_at_the_deadline(tmp_path, children):
    service = _service(tmp_path / "home")
    pid = _started(service, children)
    calls = []
    assert await_ready({service: pid}, lambda: calls.append(1) or len(calls) == 3, _deadline())
    assert len(calls) == 3
    assert not await_ready({service: pid}, lambda: False, time.monotonic() + 0.3, interval=0.05)


def test_the_last_error_is_redacted_and_falls_back_to_the_last_line(tmp_path):
    service = _service(tmp_path / "home")
    assert service.last_error() == "no log"
    service.log_file.write_text("one\ntwo\n")
    assert service.last_error() == "two"
    service.log_file.write_text("[x] ERROR bad password=s3cret\nlater INFO\n")
    service.redact = lambda line: line.replace("s3cret", "***")
    assert service.last_error() == "[x] ERROR bad password=***"


def test_a_home_comes_from_its_variable_else_the_default(monkeypatch):
    monkeypatch.delenv("LOGWHEEL_TEST_HOME", raising=False)
    assert home_from_env("LOGWHEEL_TEST_HOME", ".logwheel/x") == Path(".logwheel/x")
    monkeypatch.setenv("LOGWHEEL_TEST_HOME", "/elsewhere")
    assert home_from_env("LOGWHEEL_TEST_HOME", ".logwheel/x") == Path("/elsewhere")
