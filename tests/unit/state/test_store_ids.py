"""The ids a deduplicating task has seen, in its real RocksDB store: journaled values in, an
index by event time for collecting them, and — behind the Bloom filter — no store read for a
record seen for the first time (counted on the real store, not a mock)."""

from __future__ import annotations

from framework import Computation, Dedup, Pipeline
from framework.core.dedup import encode_seen, id_key
from framework.core.executor import Executor
from framework.core.timers import decode_timer
from framework.state.store import TaskStore
from framework.testing import MemoryOutput


class CountingStore(TaskStore):
    """The real store, counting the id lookups that reach RocksDB."""

    reads = 0

    def id_time(self, key: str, rid: str) -> int | None:
        self.reads += 1
        return super().id_time(key, rid)


class Clicks(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1


def _seen(key: str, rid: str, time: int | None) -> tuple[bytes, bytes | None]:
    return id_key(key, rid), encode_seen(key, rid, time)


def _executor(store: TaskStore, horizon_ms: int = 3_600_000) -> Executor:
    pipeline = Pipeline("clicks")
    pipeline.source("clicks")
    pipeline.computation(
        "count", Clicks, inputs={"clicks": None}, dedup=Dedup(horizon_ms=horizon_ms)
    )
    spec = pipeline["count"]
    return Executor(spec, store, store, MemoryOutput(spec), ids=store)


def _commit(executor: Executor, store: TaskStore) -> None:
    ids = [_seen(k, r, t) for k, r, t in executor.ids.changes()]
    states = [(key.encode(), raw) for key, raw in executor.state.changes()]
    store.apply(states, [], {}, ids)
    executor.state.committed()
    executor.ids.committed()


def _record(key: str, rid: str, time: int):
    from framework.core.api import Record

    return Record(key, {}, time, "clicks", rid)


def test_ids_survive_a_reopen_and_a_tombstone_removes_the_id_and_its_time_entry(tmp_path):
    store = TaskStore(tmp_path / "task-0", decode_timer)
    store.apply([], [], {"ids": 2}, [_seen("ann", "a", 10), _seen("bob", "b", 20)])
    store.close()
    store = TaskStore(tmp_path / "task-0", decode_timer)
    assert store.id_time("ann", "a") == 10 and store.id_time("bob", "x") is None
    assert sorted(store.ids()) == [("ann", "a", 10), ("bob", "b", 20)]
    assert list(store.ids_between(0, 15)) == [("ann", "a")]
    store.apply([], [], {"ids": 3}, [_seen("ann", "a", None)])
    assert store.id_time("ann", "a") is None and list(store.ids_between(0, 100)) == [("bob", "b")]
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
            held.append(sum(1 for _ in store.ids()))
    assert max(held) <= (horizon + horizon // 4 + 2_000) // 50
    assert held[-1] >= horizon // 50
    store.close()
