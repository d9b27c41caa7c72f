"""The points where a chaos test stops a sink's process: what `LOGWHEEL_SINK_STOP_AT` may
name, and that the process stops itself the Nth time it reaches the point named, once, and
never at another. The stop itself (SIGSTOP to its own pid) is a stand-in here; a real one:
tests/chaos/test_sink_chaos.py."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest

from framework.errors import ConfigurationError
from framework.sinks import stops


def test_unset_is_no_stop():
    assert stops._parse("") is None


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("before-transaction", ("before-transaction", 1)),
        ("in-transaction:3", ("in-transaction", 3)),
        ("after-commit:1", ("after-commit", 1)),
    ],
)
def test_a_point_is_named_with_the_time_it_is_stopped_at_the_first_by_default(text, wanted):
    assert stops._parse(text) == wanted


@pytest.mark.parametrize("text", ["after_commit", "commit:2", ":2"])
def test_a_point_that_is_none_of_the_batchs_is_refused_naming_them(text):
    with pytest.raises(
        ConfigurationError, match="before-transaction.*in-transaction.*after-commit"
    ):
        stops._parse(text)


@pytest.mark.parametrize("text", ["after-commit:0", "after-commit:-1", "after-commit:x"])
def test_a_time_that_is_no_whole_number_from_1_is_refused_naming_the_form(text):
    """The Nth time counts from 1: the 0th (or a word) would never come, and the process that
    was to stop would run on in silence."""
    with pytest.raises(ConfigurationError, match="':N'"):
        stops._parse(text)


@pytest.fixture
def stopped(monkeypatch) -> list[tuple[int, int]]:
    """The signals the process sends itself, written down instead of sent; nothing wanted."""
    sent: list[tuple[int, int]] = []
    stand_in = SimpleNamespace(getpid=os.getpid, kill=lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(stops, "os", stand_in)
    monkeypatch.setattr(stops, "_wanted", None)
    monkeypatch.setattr(stops, "_reached", 0)
    return sent


def test_nothing_wanted_stops_at_no_point(stopped):
    for point in stops.POINTS:
        stops.stop_at(point)
    assert stopped == []


def test_the_process_stops_itself_the_nth_time_it_reaches_the_point_and_only_then(
    stopped, monkeypatch
):
    monkeypatch.setattr(stops, "_wanted", ("in-transaction", 3))
    for _ in range(2):
        for point in stops.POINTS:  # the other points are not counted
            stops.stop_at(point)
    assert stopped == []
    stops.stop_at("after-commit")
    stops.stop_at("in-transaction")
    assert stopped == [(os.getpid(), signal.SIGSTOP)]
    for _ in range(3):
        stops.stop_at("in-transaction")
    assert stopped == [(os.getpid(), signal.SIGSTOP)]  # once
