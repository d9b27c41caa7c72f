"""The timer service: one timer per (key, tag), ordered firing, changes against the journal."""

from __future__ import annotations

from framework.core.api import Timer
from framework.core.timers import TimerService


def test_timer_service_changes_and_lazy_deletion():
    ts = TimerService([("a", Timer(10, "t")), ("b", Timer(5, "t", "processing"))])
    assert ts.earliest("event") == 10 and ts.earliest("processing") == 5
    ts.set("a", Timer(20, "t"))
    ts.set("a", Timer(30, "u"))
    ts.cancel("a", "u")  # set and cancelled since the commit: no change to report
    assert ts.earliest("event") == 20
    assert ts.pop_due("event", 19) is None
    assert ts.pop_due("event", 20) == ("a", Timer(20, "t"))
    assert ts.changes() == [("a", "t", None)]  # fired = deleted
    ts.committed()
    assert ts.changes() == []
    for i in range(1000):  # heavy moving compacts the heap without losing the live timer
        ts.set("c", Timer(1000 - i, "m"))
    assert len(ts._heaps["event"]) < 200
    assert ts.earliest("event") == 1
    assert sorted(ts.pending()) == [("b", Timer(5, "t", "processing")), ("c", Timer(1, "m"))]


def test_timer_service_moved_after_changes_stays_pending():
    ts = TimerService()
    ts.set("a", Timer(1, "t"))
    assert ts.changes() == [("a", "t", Timer(1, "t"))]
    ts.set("a", Timer(2, "t"))
    ts.committed()
    assert ts.changes() == [("a", "t", Timer(2, "t"))]
    ts.committed()
    ts.cancel("a", "t")
    assert ts.changes() == [("a", "t", None)]
