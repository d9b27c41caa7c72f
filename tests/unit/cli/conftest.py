"""Fixtures of the command line's unit tests."""

from __future__ import annotations

import pytest

from tests.unit.cli.recording import record


@pytest.fixture
def no_broker(monkeypatch):
    """A command never starts the embedded broker here (the bootstrap is given, or
    `LOGWHEEL_BOOTSTRAP`'s when a test sets it), and logging stays as pytest set it up: the
    calls of `framework.core.logs.setup` are returned."""
    monkeypatch.delenv("LOGWHEEL_BOOTSTRAP", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("a unit test started the embedded broker")

    monkeypatch.setattr("framework.broker.bootstrap.ensure_running", refuse)
    return record(monkeypatch, "framework.core.logs.setup")
