"""The ids a deduplicating task has seen, in its real RocksDB store: journal segments in, a
key per id, tombstones that take a segment's ids with it, and — behind the Bloom filter — no
store read for a record seen for the first time (counted on the real store, not a mock)."""

from __future__ import annotations

from framework import Computation, Dedup, Pipeline
from framework.core.api import Record
from framework.core.dedup import Segment, encode_segment
from framework.core.executor import Executor
from framework.core.timers import decode_timer
from framework.state.store import TaskStore
from framework.testing import MemoryOutput


class CountingStore(TaskStore):
    """The real store, counting the id lookups that reach RocksDB."""

    reads = 0

    def has_id(self, key: str, rid: str) -> bool:
        self.reads += 1
        return super().has_id(key, rid)


class Clicks(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1


def _executor(store: TaskStore, horizon_ms: int = 3_600_000) -> Executor:
    pipeline = Pipeline("clicks")
    pipeline.source("clicks")
    dedup = Dedup(horizon_ms=horizon_ms)
    pipeline.computation("count", Clicks, inputs={"clicks": None}, dedup=dedup)
    spec = pipeline["count"]
    return Executor(spec, store, store, MemoryOutput(spec), ids=store)


def _commit(executor: Executor, store: TaskStore) -> None:
    states = [(key.encode(), raw) for key, raw in executor.state.changes()]
    store.apply(states, [], {}, executor.ids.changes())
    executor.state.committed()
    executor.ids.committed()


def _record(key: str, rid: str, time: int) -> Record:
    return Record(key, {}, time, "clicks", rid)


def test_segments_survive_a_reopen_and_a_tombstone_removes_the_segment_and_its_ids(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    ids = [("ann", "a"), ("bob", "b")]
    store.apply([], [], {"ids": 1}, [Segment(b"s1", encode_segment(0, ids), 0, [])])
    store.close()
    store = TaskStore(tmp_path / "task-0", decode_timer)  # as restore hands it: raw values
    assert store.has_id("ann", "a") and store.has_id("bob", "b")
    assert not store.has_id("ann", "b")
    [segment] = store.id_segments()
    assert segment.key == b"s1" and segment.start == 0 and segment.ids == ids
    store.apply([], [], {"ids": 2}, [Segment(b"s1", None, 0, [])])
    assert not store.has_id("ann", "a") and list(store.id_segments()) == []
    store.close()


def test_a_segment_and_its_tombstone_restored_in_one_batch_leave_no_id_behind(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    value = encode_segment(0, [("ann", "a")])
    store.apply([], [], {"ids": 2}, [Segment(b"s1", value, 0, []), Segment(b"s1", None, 0, [])])
    assert not store.has_id("ann", "a") and list(store.id_segments()) == []
    store.close()


def test_a_first_seen_record_does_no_store_read_and_a_duplicate_is_confirmed_in_the_store(
    tmp_path,
):
    store = CountingStore(tmp_path / "task-0", decode_timer)
    executor = _executor(store)
    for i in range(2_000):
        executor.process(_record(f"user-{i % 10}", f"click-{i}", 1_000 + i))
    _commit(executor, store)
    # a false positive of the filter may cost a read; its rate is bounded by 1 %
    assert store.reads <= 20
    executor = _executor(store)  # restarted: the filter rebuilt from the store
    store.reads = 0
    executor.process(_record("user-3", "click-3", 1_003))
    assert store.reads == 1 and executor.duplicates == 1
    assert store.load("user-3") == b'{"n":200}'
    store.close()


def test_the_stores_id_count_stays_bounded_under_a_moving_watermark(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    executor, horizon, held = _executor(store, horizon_ms=10_000), 10_000, []
    for t in range(0, 300_000, 50):  # 6,000 records, the watermark 1 s behind
        executor.process(_record(f"user-{t % 13}", f"click-{t}", t))
        executor.advance_watermark(t - 1_000)
        if t % 1_000 == 0:
            _commit(executor, store)
            held.append(sum(len(s.ids) for s in store.id_segments()))
    assert max(held) <= (horizon + horizon // 4 + 2_000) // 50
    assert held[-1] >= horizon // 50
    assert not store.has_id("user-0", "click-0")  # collected, with its segment
    store.close()
