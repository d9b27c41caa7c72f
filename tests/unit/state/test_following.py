"""One consumer feeding table replicas (framework/state/following.py): each replica gets its own
records of a batch in one call, with the next offset of each of its partitions; records of a
partition nobody follows are dropped; a sync reads the followed partitions to their end and
moves a replica past a transaction's marker no record reports. The tables built on it are tested
in test_tables.py and test_global_tables.py."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from framework.state.following import Follower
from tests.unit.state.fakes import FakeLog


class Replica:
    """Notes each batch it is handed, as (offsets of its records, new positions)."""

    def __init__(self, **positions: int) -> None:
        self.positions = {int(p.removeprefix("p")): o for p, o in positions.items()}
        self.batches: list[tuple[list[tuple[int, int]], dict[int, int]]] = []

    def apply(self, msgs, positions) -> None:
        self.batches.append(([(m.partition(), m.offset()) for m in msgs], dict(positions)))
        self.positions.update(positions)


class Marked(FakeLog):
    """Partitions whose last transaction's commit marker follows their last record: their end
    is one past it, and a consumer that reads the last record moves past the marker too."""

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        low, high = super().get_watermark_offsets(tp, timeout, cached)
        return low, high + 1

    def consume(self, num_messages=1, timeout=-1):
        out = super().consume(num_messages, timeout)
        for tp, position in self.positions.items():
            if position == len(self.logs.get(tp, [])):
                self.positions[tp] = position + 1
        return out


def log_of(cls=FakeLog) -> FakeLog:
    log = cls()
    log.write("t", 0, (b"a", b"1"), (b"b", b"2"), (b"c", b"3"))
    log.write("t", 1, (b"d", b"4"))
    log.write("u", 0, (b"e", b"5"))
    return log


def assign(log: FakeLog, positions: dict[tuple[str, int], int]) -> None:
    log.incremental_assign([TopicPartition(t, p, o) for (t, p), o in positions.items()])


def test_a_replica_gets_its_records_of_a_batch_at_once_with_each_partitions_next_offset():
    log = log_of()
    assign(log, {("t", 0): 0, ("t", 1): 0, ("u", 0): 0})
    follower, replica = Follower(log), Replica(p0=0, p1=0)
    follower.replicas.update({("t", 0): replica, ("t", 1): replica})
    follower.step()
    assert replica.batches == [([(0, 0), (0, 1), (0, 2), (1, 0)], {0: 3, 1: 1})]  # not u's record


def test_replicas_of_two_topics_are_fed_apart_and_an_empty_batch_feeds_none():
    log = log_of()
    assign(log, {("t", 1): 0, ("u", 0): 0})
    follower, t, u = Follower(log), Replica(p1=0), Replica(p0=0)
    follower.replicas.update({("t", 1): t, ("u", 0): u})
    follower.step()
    follower.step()
    assert (t.batches, u.batches) == ([([(1, 0)], {1: 1})], [([(0, 0)], {0: 1})])


def test_a_sync_reads_the_followed_partitions_to_their_end_and_no_other():
    log = log_of()
    assign(log, {("t", 0): 1, ("u", 0): 0})
    follower, replica = Follower(log), Replica(p0=1)
    follower.replicas[("t", 0)] = replica
    follower.sync([("t", 0), ("u", 0)])  # u is not followed: not waited for
    assert [offsets for offsets, _ in replica.batches] == [[(0, 1), (0, 2)]]
    assert replica.positions == {0: 3}


def test_a_sync_moves_a_replica_past_the_marker_after_its_last_record():
    log = log_of(Marked)
    assign(log, {("t", 0): 0})
    follower, replica = Follower(log), Replica(p0=0)
    follower.replicas[("t", 0)] = replica
    follower.sync([("t", 0)])
    assert replica.batches[-1] == ([], {0: 4})
    assert replica.positions == {0: 4}
