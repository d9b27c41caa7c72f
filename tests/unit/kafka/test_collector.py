from __future__ import annotations

from framework.kafka import reading
from framework.kafka.collector import Collector
from tests.unit.kafka.fakes import MovedLeader


def test_records_delivered_at_no_offset_are_placed_once_the_moved_leader_is_found():
    """A retried send the broker had written reports no offset; its partition's end then counts
    as written. Such records come with a leader that moved: the admin client's question to the
    old one had waited 30 s for no end (-1001), stalling the commit (issue 24), and no end
    must never count as an offset."""
    collector = Collector({"bootstrap.servers": "127.0.0.1:1"})
    admin = MovedLeader(end=12, moved_after=2)
    collector._admin = lambda: admin
    collector._unplaced.add(("s", 0))
    collector.written[("s", 1)] = 40
    collector._place()
    assert collector.written == {("s", 0): 11, ("s", 1): 40}
    assert not collector._unplaced
    assert admin.waits == [reading.ATTEMPT_S] * 3
