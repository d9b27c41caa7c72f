"""What a process can answer from: the active replica's committed documents, a standby's with
the changelog offset it has applied (never under-stated), nothing once forgotten."""

from __future__ import annotations

from framework.query.replicas import STALE_S, Replicas


class Store:
    def __init__(self, docs: dict[str, bytes], checkpoint: int = 0) -> None:
        self.docs, self.at, self.closed = docs, checkpoint, False

    def load(self, key: str) -> bytes | None:
        assert not self.closed, "read after close"
        return self.docs.get(key)

    def checkpoint(self) -> dict[str, int]:
        return {"changelog": self.at}


def test_an_active_replica_answers_and_a_forgotten_one_does_not():
    replicas, store = Replicas(), Store({"ann": b"{}"})
    replicas.activate(2, store)
    read = replicas.read(2, "ann")
    assert (read.raw, read.active) == (b"{}", True)
    assert replicas.read(2, "bob").raw is None
    assert replicas.read(1, "ann") is None
    replicas.forget(2)
    store.closed = True
    assert replicas.read(2, "ann") is None
    assert replicas.holds() == {}


def test_a_standby_has_applied_at_least_its_checkpoint_and_its_position_past_markers():
    replicas, store = Replicas(), Store({"ann": b"1"}, checkpoint=10)
    replicas.follow(0, store)
    assert replicas.read(0, "ann").applied == 10  # no position yet: the checkpoint
    replicas.followed(0, 12)  # past the commit marker after offset 10's record
    assert (replicas.read(0, "ann").applied, replicas.read(0, "ann").active) == (12, False)
    replicas.followed(0, 11)  # positions never go back
    assert replicas.read(0, "ann").applied == 12
    replicas.activate(0, store)  # taken over: a position no longer counts
    replicas.followed(0, 99)
    assert replicas.read(0, "ann").active
    replicas.forget_all()
    assert replicas.holds() == {}


def test_an_owned_partition_answers_only_while_the_loop_goes_round():
    now = [100.0]
    replicas = Replicas(clock=lambda: now[0])
    replicas.activate(1, Store({"ann": b"{}"}))
    replicas.follow(2, Store({"bob": b"{}"}))
    now[0] += STALE_S + 0.1  # the loop stalled: the group may have moved the partition
    assert replicas.read(1, "ann") is None
    assert replicas.read(2, "bob").raw == b"{}"  # a standby says how far behind it is anyway
    replicas.beat()
    assert replicas.read(1, "ann").active
