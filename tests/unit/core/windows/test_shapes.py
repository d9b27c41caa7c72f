"""Window assignment: epoch-aligned hopping windows, half-open boundaries, bad shapes refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core.windows import Hopping, Session, Tumbling
from framework.errors import ConfigurationError


@given(
    ts=st.integers(-(10**6), 10**6),
    every=st.integers(1, 50),
    extra=st.integers(0, 120),
)
def test_a_timestamp_is_in_exactly_the_hopping_windows_that_contain_it(ts, every, extra):
    window = Hopping(size_ms=every + extra, every_ms=every)
    brute = [s for s in range(ts - window.size_ms - every, ts + every) if s % every == 0]
    containing = [s for s in brute if s <= ts < s + window.size_ms]
    assert sorted(window.starts(ts)) == containing


def test_boundaries_are_inclusive_at_the_start_and_exclusive_at_the_end():
    window = Tumbling(size_ms=10)
    assert list(window.starts(10)) == [10]
    assert list(window.starts(9)) == [0]
    assert list(window.starts(-1)) == [-10]
    hopping = Hopping(size_ms=10, every_ms=5)
    assert list(hopping.starts(10)) == [10, 5]
    assert list(hopping.starts(14)) == [10, 5]


def test_a_tumbling_window_is_a_hopping_one_every_size_ms():
    assert (Tumbling(60_000).size_ms, Tumbling(60_000).every_ms) == (60_000, 60_000)
    assert repr(Tumbling(10, grace_ms=2)) == "Tumbling(size_ms=10, grace_ms=2)"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Tumbling(0),
        lambda: Tumbling(10, grace_ms=-1),
        lambda: Tumbling(1.5),
        lambda: Hopping(10, 20),
        lambda: Hopping(10, 0),
        lambda: Session(0),
        lambda: Session(10, grace_ms=-5),
    ],
)
def test_a_window_that_cannot_be_is_refused_naming_the_fix(make):
    with pytest.raises(ConfigurationError, match=r"e\.g\."):
        make()
