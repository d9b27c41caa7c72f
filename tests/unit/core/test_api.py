"""framework.core.api: the fast Record constructor of the per-record path."""

from __future__ import annotations

import dataclasses

import pytest

from framework.core.api import Record, make_record


def test_make_record_builds_the_same_frozen_record():
    made = make_record("k", {"a": 1}, 7, "s", "t/0/1")
    assert type(made) is Record
    assert made == Record("k", {"a": 1}, 7, "s", "t/0/1")
    assert repr(made) == repr(Record("k", {"a": 1}, 7, "s", "t/0/1"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.key = "other"
