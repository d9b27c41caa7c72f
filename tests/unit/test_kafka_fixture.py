"""Which broker the `kafka` fixture picks, and the helpers it gives tests."""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path

import pytest

from tests.support import unique_name


def _load_conftest():
    """tests/conftest.py as a plain module (pytest's own copy is not importable by name in
    every import mode)."""
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("logwheel_tests_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conftest = _load_conftest()


def _docker(answer: bool):
    calls = []

    def available() -> bool:
        calls.append(1)
        return answer

    return available, calls


def test_env_bootstrap_wins_and_docker_is_not_asked():
    available, calls = _docker(True)
    choice = conftest.choose_broker({"LOGWHEEL_BOOTSTRAP": "kafka:9092"}, available)
    assert choice == "env"
    assert calls == []


def test_docker_when_an_engine_answers():
    available, _ = _docker(True)
    assert conftest.choose_broker({}, available) == "docker"


def test_embedded_when_no_engine_answers():
    available, _ = _docker(False)
    assert conftest.choose_broker({}, available) == "embedded"


def test_empty_bootstrap_counts_as_unset():
    available, _ = _docker(False)
    assert conftest.choose_broker({"LOGWHEEL_BOOTSTRAP": ""}, available) == "embedded"


@pytest.mark.parametrize("forced", ["docker", "embedded"])
def test_choice_can_be_forced(forced):
    available, calls = _docker(forced != "docker")
    assert conftest.choose_broker({"LOGWHEEL_TEST_BROKER": forced}, available) == forced
    assert calls == []


class _FakeDocker:
    """The one call of the `docker` package the probe makes: `from_env(...).ping()`."""

    def __init__(self, ping) -> None:
        self.ping, self.closed = ping, False

    def from_env(self, timeout: float) -> _FakeDocker:
        self.timeout = timeout
        return self

    def close(self) -> None:
        self.closed = True


def test_the_docker_probe_is_true_only_when_the_engine_answers_its_ping(monkeypatch):
    answering = _FakeDocker(lambda: True)
    monkeypatch.setitem(sys.modules, "docker", answering)
    assert conftest.docker_available(timeout=2.0) is True
    assert answering.timeout == 2.0 and answering.closed

    def refused():
        raise ConnectionError("engine down")

    monkeypatch.setitem(sys.modules, "docker", _FakeDocker(refused))
    assert conftest.docker_available() is False


def test_the_docker_probe_is_false_when_nothing_listens(monkeypatch):
    """The real client against a port where nothing listens: no engine, no exception."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    assert conftest.docker_available(timeout=2.0) is False


def test_unique_names_are_valid_topic_names_and_distinct():
    names = {unique_name("orders") for _ in range(1000)}
    assert len(names) == 1000
    assert all(n.startswith("orders-") and len(n) == len("orders-") + 8 for n in names)
