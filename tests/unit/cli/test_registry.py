"""`logwheel registry`: what each action prints and exits with. The registry's own start is
stubbed (tests/unit/registry/test_embedded.py and tests/integration/test_registry.py run it)."""

from __future__ import annotations

import pytest

from framework.cli.main import main
from framework.cli.registry import NOT_RUNNING
from framework.jvm.service import Started
from framework.registry.embedded import Registry


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "registry"
    monkeypatch.setenv("LOGWHEEL_REGISTRY_DIR", str(home))
    return home.resolve()


def test_status_of_a_registry_never_started_exits_3_and_stop_says_it_was_not_running(home, capsys):
    assert main(["registry", "status"]) == NOT_RUNNING
    assert capsys.readouterr().out == f"registry not running ({home})\n"
    assert main(["registry", "stop"]) == 0
    assert capsys.readouterr().out == f"registry was not running ({home})\n"


def test_a_start_prints_the_url_alone_on_its_last_line(home, capsys, monkeypatch):
    timeouts = []

    def start(self, timeout):
        timeouts.append(timeout)
        return Started("http://127.0.0.1:18081", len(timeouts) == 1, 2.34, 55)

    monkeypatch.setattr(Registry, "start", start)
    assert main(["registry", "start", "--timeout", "90"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "registry ready in 2.3s (pid 55)",
        "http://127.0.0.1:18081",
    ]
    assert main(["registry", "start"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "registry already running (pid 55), answered in 2.3s",
        "http://127.0.0.1:18081",
    ]
    assert timeouts == [90.0, 60.0]


def test_a_running_registrys_status_ends_with_its_url(home, capsys, monkeypatch):
    monkeypatch.setattr(Registry, "status", lambda self: "http://127.0.0.1:18081")
    monkeypatch.setattr(Registry, "running_pid", lambda self: 55)
    assert main(["registry", "status"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"registry running (pid 55, schemas in {home / 'data'})",
        "http://127.0.0.1:18081",
    ]
