"""Checks that refuse internal records no logwheel writer could have written: marks that claim
a time beyond the skew allowance, name no offset of their reader's partition or one beyond its
end, and timer entries that do not decode or sit under another timer's key."""

from __future__ import annotations

import pytest

from framework import BoundedOutOfOrderness
from framework.core.api import Timer
from framework.core.forgery import (
    MARK_SKEW_MS,
    allowance,
    check_ends,
    check_mark,
    check_names,
    checked_timer,
)
from framework.core.pipeline import InjectorWatermark
from framework.core.timers import encode_timer, timer_key
from framework.core.watermarks import Mark
from framework.errors import ForgedRecord

NOW = 1_700_000_000_000


def test_the_allowance_is_the_largest_sources_plus_the_skew_slack():
    assert allowance([]) == 300_000 + MARK_SKEW_MS
    policies = [BoundedOutOfOrderness(0), InjectorWatermark("gen", max_future_ms=900_000), None]
    assert allowance(policies) == 900_000 + MARK_SKEW_MS


def test_a_mark_within_the_allowance_passes_and_one_beyond_is_refused():
    check_mark(Mark("a/task/0", NOW + 1000, False, {}, NOW), NOW, 1000)
    with pytest.raises(ForgedRecord, match="its watermark .* beyond the allowance of 1000 ms"):
        check_mark(Mark("a/task/0", NOW + 1001, False, {}), NOW, 1000)
    with pytest.raises(ForgedRecord, match="its input watermark"):
        check_mark(Mark("a/task/0", NOW, False, {}, NOW + 10**9), NOW, 1000)
    with pytest.raises(ForgedRecord, match="offset -5 of s\\[0\\]"):
        check_mark(Mark("a/task/0", NOW, False, {("s", 0): -5}), NOW, 1000)


def test_a_mark_must_name_the_readers_partition_even_where_it_wrote_nothing():
    check_names(Mark("a/task/0", 0, False, {("s", 1): -1}), "s", 1)
    with pytest.raises(ForgedRecord, match="names no offset of s\\[0\\]"):
        check_names(Mark("a/task/0", 0, False, {("s", 1): 7}), "s", 0)


def test_a_mark_naming_an_offset_at_or_beyond_the_partitions_end_is_refused():
    mark = Mark("a/task/0", 0, False, {("s", 0): 9, ("s", 1): -1, ("other", 0): 10**12})
    check_ends(mark, {("s", 0): 10, ("s", 1): 0})  # topics not checked are left alone
    with pytest.raises(ForgedRecord, match="offset 9 of s\\[0\\] lies beyond its end \\(9\\)"):
        check_ends(mark, {("s", 0): 9})


def test_a_timer_entry_must_decode_and_sit_under_its_own_key():
    raw = encode_timer("k", "t", Timer(5, "t"))
    assert checked_timer(timer_key("k", "t"), raw) == Timer(5, "t")
    with pytest.raises(ForgedRecord, match="under another key"):
        checked_timer(timer_key("k", "other"), raw)
    with pytest.raises(ForgedRecord, match="undecodable timer entry") as refused:
        checked_timer(timer_key("k", "t"), b"\x00garbage")
    assert refused.value.stage == "timers"
