"""bench/windowed.py's reference: every window the closing records close, none of theirs."""

from __future__ import annotations

import collections

from bench import verify, windowed


def test_the_reference_counts_every_closed_window_and_the_check_finds_each_fault() -> None:
    """The reference counts every window the closing records close and none of theirs; the
    check finds a missing window, a wrong count and a result written twice (it can fail)."""
    size = windowed.SIZE_MS
    data = windowed.make_input(records=6, keys=2, minutes=3, base=0)
    data_events = data.events[: -data.closing]
    assert [e.timestamp for e in data_events] == sorted(e.timestamp for e in data_events)
    assert {e.timestamp for e in data.events[-data.closing :]} == {8 * size}  # two windows on
    assert {e.key for e in data.events[-data.closing :]} >= {"k0", "k1"}
    assert all(start < 6 * size for _, start in data.expected)  # closing windows left out
    assert sum(data.expected.values()) == 6 + 2 * windowed.PARTITIONS  # data and warm-up
    expected = data.results()
    written = collections.Counter(expected)
    assert verify.passed(verify.compare(expected, written))
    key, start, count = first = min(expected)
    written[first] -= 1
    written[(key, start, count + 1)] += 1  # a wrong count
    written[max(expected)] += 1  # a duplicate
    written.pop(sorted(expected)[1])  # a window never written
    check = verify.compare(expected, +written)
    assert (check["missing"], check["unexpected"], check["duplicated"]) == (2, 1, 1)
