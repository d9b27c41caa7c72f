"""A task's RocksDB store holds only what a committed transaction made durable, with the
checkpoint of the journal offsets it reflects in the same batch (invariants 1 and 2)."""

from __future__ import annotations

from framework.core.api import Timer
from framework.core.timers import decode_timer, encode_timer, timer_key
from framework.state.store import TaskStore


def _timer(key: str, tag: str, time: int) -> tuple[bytes, bytes | None]:
    return timer_key(key, tag), encode_timer(key, tag, Timer(time, tag, "event"))


def test_committed_state_timers_and_checkpoint_survive_a_reopen(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    store.apply([(b"ann", b'{"n":1}')], [_timer("ann", "close", 60)], {"changelog": 1, "timers": 1})
    store.apply([(b"bob", b'{"n":2}')], [], {"changelog": 2})
    store.close()
    again = TaskStore(tmp_path / "task-0", decode_timer)
    assert again.load("ann") == b'{"n":1}' and again.load("bob") == b'{"n":2}'
    assert list(again.load_all()) == [("ann", Timer(60, "close", "event"))]
    assert again.checkpoint() == {"changelog": 2, "timers": 1}  # merged, newest per journal
    again.close()


def test_a_tombstone_deletes_a_key_and_a_fired_timer(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    store.apply([(b"ann", b"{}")], [_timer("ann", "close", 60)], {"changelog": 1, "timers": 1})
    store.apply(
        [(b"ann", None)], [(timer_key("ann", "close"), None)], {"changelog": 2, "timers": 2}
    )
    assert store.load("ann") is None and list(store.load_all()) == []
    store.close()


def test_an_undecodable_timer_is_skipped_not_fatal(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    store.apply([], [(timer_key("ann", "x"), b"garbage"), _timer("bob", "y", 5)], {"timers": 2})
    assert list(store.load_all()) == [("bob", Timer(5, "y", "event"))]
    store.close()


def test_wipe_forgets_everything_and_the_store_goes_on(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    store.apply([(b"ann", b"{}")], [], {"changelog": 1})
    store.set_topic_ids({"p.c.changelog": "abc"})
    store.wipe()
    assert store.load("ann") is None and store.checkpoint() == {} and store.topic_ids() == {}
    store.apply([(b"bob", b"{}")], [], {"changelog": 1})
    assert store.load("bob") == b"{}"
    store.close()
