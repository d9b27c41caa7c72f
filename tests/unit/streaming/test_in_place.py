"""The restart in place's one decision: a process asked to stop (its stop event set, or SIGTERM
or SIGINT received even if no Python handler could run) ends instead of starting again; any
other signal is no stop. The exec itself runs in a process of its own:
tests/unit/streaming/test_watchdog.py."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from framework.streaming import in_place
from framework.streaming.in_place import Restart


@pytest.fixture
def restart():
    """A `Restart` of a fresh stop event, with handlers that do nothing for the signals the
    tests raise; the interpreter's wakeup fd and the handlers put back after."""
    previous = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(previous)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    for number in handlers:
        signal.signal(number, lambda *_: None)
    made = Restart(threading.Event())
    yield made
    os.close(signal.set_wakeup_fd(previous))
    os.close(made._signals)
    for number, handler in handlers.items():
        signal.signal(number, handler)


def test_a_process_neither_signalled_nor_told_to_stop_is_not_stopping(restart):
    assert not restart.stopping()


def test_the_stop_event_set_is_stopping(restart):
    restart.stop.set()
    assert restart.stopping()


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_received_is_stopping_though_its_handler_set_nothing(restart, number):
    signal.raise_signal(number)
    assert restart.stopping() and not restart.stop.is_set()


def test_another_signal_is_no_stop(restart):
    signal.raise_signal(signal.SIGUSR1)
    assert not restart.stopping()


def test_a_stop_signal_among_others_is_stopping(restart):
    signal.raise_signal(signal.SIGUSR1)
    signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGUSR1)
    assert restart.stopping()


class Ended(BaseException):
    """What the stand-in of os._exit raises: the test goes on."""


def _outcomes(monkeypatch) -> list:
    outcomes: list = []

    def exit_(status):
        outcomes.append(("exit", status))
        raise Ended

    monkeypatch.setattr(os, "_exit", exit_)
    monkeypatch.setattr(in_place, "restart_in_place", lambda: outcomes.append("restart"))
    return outcomes


def test_a_process_not_asked_to_stop_starts_again(restart, monkeypatch):
    outcomes = _outcomes(monkeypatch)
    signal.raise_signal(signal.SIGUSR1)
    restart()
    assert outcomes == ["restart"]


def test_a_process_asked_to_stop_ends_with_status_0_instead_of_starting_again(
    restart, monkeypatch, caplog
):
    outcomes = _outcomes(monkeypatch)
    signal.raise_signal(signal.SIGTERM)
    with pytest.raises(Ended), caplog.at_level("WARNING"):
        restart()
    assert outcomes == [("exit", 0)]
    assert "ending the process instead" in caplog.text
