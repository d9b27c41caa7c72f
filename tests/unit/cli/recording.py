"""Stand-ins for what a `logwheel` command calls, for unit tests of the command line: each call
is written down (args, kwargs) as a test reads it back; what the callee does is tested where it
lives."""

from __future__ import annotations

import pytest

PIPELINE = "jobs.wordcount:pipeline"


class Calls(list):
    """The calls made, as (args, kwargs); `one` is the only one."""

    @property
    def one(self) -> tuple[tuple, dict]:
        assert len(self) == 1, f"called {len(self)} times"
        return self[0]


def record(monkeypatch: pytest.MonkeyPatch, target: str, returns=None, raises=None) -> Calls:
    """Replace the function `target` (a dotted path) by one that notes its calls and returns
    `returns` (or raises `raises`)."""
    calls = Calls()

    def called(*args, **kwargs):
        calls.append((args, kwargs))
        if raises is not None:
            raise raises
        return returns

    monkeypatch.setattr(target, called)
    return calls
