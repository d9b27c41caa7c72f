"""Restoring a task's store from its changelog and timer journal (invariant 2), with the
journals served from memory: a batch per `step`, resumed from the checkpoint, wiped when the
journals contradict it (a corrupted task), standbys followed until removed, and a restore whose
client stands still given up for new clients."""

from __future__ import annotations

import pytest

from framework.core.api import Timer
from framework.core.timers import decode_timer, encode_timer, timer_key
from framework.errors import Rejoin
from framework.state.restore import STUCK_S, Restorer
from framework.state.store import TaskStore
from jobs.wordcount import build
from tests.unit.state.fakes import FakeLog

SPEC = build("tm", "tm-")["count-words"]
IDS = {SPEC.changelog: "changelog-id", SPEC.timers: "timers-id"}


def _timer(key: str, tag: str, time: int) -> tuple[bytes, bytes | None]:
    return timer_key(key, tag), encode_timer(key, tag, Timer(time, tag, "event"))


def _store(tmp_path, known_ids: dict[str, str] = IDS) -> TaskStore:
    store = TaskStore(tmp_path / "task-1", decode_timer)
    store.set_topic_ids(known_ids)
    return store


def _restore(restorer: Restorer, store: TaskStore) -> None:
    restorer.add(1, store)
    for _ in range(10):
        if restorer.step():
            return
    raise AssertionError("the restore never finished")


def test_a_store_is_restored_a_batch_at_a_time_to_the_journals_end(tmp_path):
    log = FakeLog()
    counts = [(f"w{i % 100}".encode(), f'{{"n":{i}}}'.encode()) for i in range(6_000)]
    log.write(SPEC.changelog, 1, *counts, (b"w0", None))
    log.write(SPEC.timers, 1, _timer("w1", "close", 60), _timer("w2", "close", 70))
    log.write(SPEC.timers, 1, (timer_key("w2", "close"), None))
    log.write(SPEC.changelog, 0, (b"elsewhere", b"{}"))
    store = TaskStore(tmp_path / "task-1", decode_timer)
    restorer = Restorer(log, SPEC, IDS)
    restorer.add(1, store)
    assert restorer.step() == [] and restorer.restoring()
    assert store.checkpoint() == {"changelog": 5_000}
    assert restorer.step() == [(1, store)] and not restorer.busy()
    assert store.load("w99") == b'{"n":5999}' and store.load("w0") is None
    assert store.load("elsewhere") is None
    assert list(store.load_all()) == [("w1", Timer(60, "close", "event"))]
    assert store.checkpoint() == {"changelog": 6_001, "timers": 3}
    assert store.topic_ids() == IDS and log.positions == {}
    store.close()


def test_a_restore_resumes_from_the_stores_checkpoint_and_reads_only_the_tail(tmp_path):
    log = FakeLog()
    log.write(SPEC.changelog, 1, (b"ann", b'{"n":1}'), (b"bob", b'{"n":2}'), (b"cy", b'{"n":3}'))
    store = _store(tmp_path)
    store.apply([(b"ann", b'{"n":"mine"}')], [], {"changelog": 2, "timers": 0})
    _restore(Restorer(log, SPEC, IDS), store)
    assert log.served == 1
    assert store.load("ann") == b'{"n":"mine"}' and store.load("bob") is None
    assert store.load("cy") == b'{"n":3}'
    assert store.checkpoint() == {"changelog": 3, "timers": 0}
    store.close()


def test_a_checkpoint_beyond_the_changelogs_end_wipes_the_store_and_restores_from_the_start(
    tmp_path,
):
    log = FakeLog()
    log.write(SPEC.changelog, 1, (b"ann", b'{"n":1}'), (b"bob", b'{"n":2}'))
    store = _store(tmp_path)
    store.apply([(b"stale", b"{}")], [], {"changelog": 10})
    _restore(Restorer(log, SPEC, IDS), store)
    assert store.load("stale") is None
    assert store.load("ann") == b'{"n":1}' and store.load("bob") == b'{"n":2}'
    assert store.checkpoint() == {"changelog": 2}
    store.close()


def test_journal_topic_ids_that_differ_from_the_recorded_ones_wipe_the_store(tmp_path):
    log = FakeLog()
    log.write(SPEC.changelog, 1, (b"ann", b'{"n":1}'))
    store = _store(tmp_path, {SPEC.changelog: "deleted-id", SPEC.timers: "deleted-id"})
    store.apply([(b"stale", b"{}")], [], {"changelog": 1})
    _restore(Restorer(log, SPEC, IDS), store)
    assert store.load("stale") is None and store.load("ann") == b'{"n":1}'
    assert store.topic_ids() == IDS and store.checkpoint() == {"changelog": 1}
    store.close()


def test_a_standby_is_followed_without_end_until_it_is_removed(tmp_path):
    log = FakeLog()
    log.write(SPEC.changelog, 1, (b"ann", b'{"n":1}'))
    store = _store(tmp_path)
    restorer = Restorer(log, SPEC, IDS)
    restorer.add(1, store, standby=True)
    assert restorer.step() == [] and restorer.busy() and not restorer.restoring()
    assert store.load("ann") == b'{"n":1}'
    log.write(SPEC.changelog, 1, (b"bob", b'{"n":2}'))
    log.write(SPEC.timers, 1, _timer("bob", "close", 60))
    assert restorer.step() == [] and restorer.busy()
    assert store.load("bob") == b'{"n":2}' and [k for k, _ in store.load_all()] == ["bob"]
    restorer.remove(1)
    assert not restorer.busy() and log.positions == {}
    log.write(SPEC.changelog, 1, (b"cy", b'{"n":3}'))
    assert restorer.step() == [] and store.load("cy") is None
    store.close()


class StuckLog(FakeLog):
    """A client that hands nothing over and whose position stands still: what a restore's
    consumer did for about 2 minutes after a broker of three was killed (issue 24)."""

    def consume(self, num_messages=1, timeout=-1):
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_restore_that_stands_still_gives_its_client_up_for_a_new_membership(tmp_path):
    log, clock = StuckLog(), Clock()
    log.write(SPEC.changelog, 1, (b"ann", b'{"n":1}'))
    store = _store(tmp_path)
    restorer = Restorer(log, SPEC, IDS, clock=clock)
    restorer.add(1, store)
    for _ in range(3):  # a leader moving after its broker died: the fencing's 10 s or so
        clock.now += 6
        assert restorer.step() == []
    clock.now += STUCK_S
    with pytest.raises(Rejoin, match="has not moved for 32 s"):
        restorer.step()
    store.close()


class SlowLog(FakeLog):
    """A client that hands over one record per batch."""

    def consume(self, num_messages=1, timeout=-1):
        return super().consume(1, timeout)


def test_a_slow_restore_that_keeps_moving_is_never_given_up(tmp_path):
    log, clock = SlowLog(), Clock()
    log.write(SPEC.changelog, 1, *[(f"w{i}".encode(), b'{"n":1}') for i in range(5)])
    store = _store(tmp_path)
    restorer = Restorer(log, SPEC, IDS, clock=clock)
    restorer.add(1, store)
    done = []
    while not done:
        clock.now += STUCK_S + 1
        done = restorer.step()
    assert done == [(1, store)] and store.load("w4") == b'{"n":1}'
    store.close()


class _EndsUnknown(FakeLog):
    """A client whose broker goes away after `answers` questions about a partition's ends."""

    answers = len(SPEC.journals)  # the checkpoint's check asks once per journal

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        self.answers -= 1
        if self.answers < 0:
            raise RuntimeError("no broker answers")
        return super().get_watermark_offsets(tp, timeout, cached)


def test_a_task_whose_ends_could_not_be_had_is_removed_without_unassigning_anything(tmp_path):
    # A restore that failed to learn its journals' ends never assigned them; removing its task
    # (the membership closing) must not unassign them: librdkafka refuses, and the process died.
    log = _EndsUnknown()
    log.write(SPEC.changelog, 1, (b"ann", b'{"n":1}'))
    store = _store(tmp_path)
    restorer = Restorer(log, SPEC, IDS)
    with pytest.raises(RuntimeError):
        restorer.add(1, store)
    restorer.remove(1)
    assert log.positions == {} and not restorer.restoring() and restorer._ends.pending == set()
    log.__class__ = FakeLog  # the broker answers again
    _restore(restorer, store)
    assert store.load("ann") == b'{"n":1}'
    store.close()
