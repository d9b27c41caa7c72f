"""Zeitgeist end to end on the broker: what `make demo` shows, as a test."""

from __future__ import annotations

import pytest

from jobs.zeitgeist import demo

pytestmark = pytest.mark.timeout(300)


def test_demo_finds_the_planted_anomalies_and_nothing_else(kafka, capsys):
    assert demo.main(["--bootstrap", kafka, "--yes", "--seconds", "120", "--speed", "12"]) == 0
    out = capsys.readouterr().out
    assert "planted spike of 'cats'" in out and "planted dip of 'weather'" in out
