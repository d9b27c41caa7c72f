"""A keyed task of a re-keyed computation over eight source partitions, one of them minutes
behind: with `Percentile(0.85)` its hooks fire on the seven, the straggler's records are late
and counted in its mark, and the mark it publishes stays the strict watermark."""

from __future__ import annotations

from framework import Computation, Percentile, Pipeline, key_by
from framework.core.api import Record
from framework.core.dead_letters import ErrorPolicy
from framework.core.timers import decode_timer
from framework.core.watermarks import Mark, repartition_producer
from framework.kafka.output import PartIO
from framework.state.store import TaskStore
from framework.streaming.task import KeyedTask
from tests.unit.streaming.fakes import FakeCollector

BASE = 1_700_000_000_000
BEHIND = 5 * 60_000
SOURCES = 8


class Remember(Computation):
    def process_record(self, ctx, record):
        ctx.set_timer("t", record.timestamp + 1)

    def process_timer(self, ctx, timer):
        pass


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def task(tmp_path, low_watermark) -> tuple[KeyedTask, Clock]:
    pipeline = Pipeline("pt", partitions=2)
    pipeline.source("clicks")
    pipeline.computation(
        "c", Remember, inputs={"clicks": key_by("user")}, low_watermark=low_watermark
    )
    spec = pipeline["c"]
    runtime = PartIO(
        pipeline, spec, FakeCollector(), {"clicks": SOURCES}, ErrorPolicy(spec.group, "skip")
    )
    clock = Clock()
    store = TaskStore(tmp_path / "store", decode_timer)
    return KeyedTask(runtime, 0, store, clock=clock), clock


def feed(keyed: KeyedTask, clock: Clock, seconds: int = 60) -> None:
    """A minute of marks: every source partition reads 100 records a second; seven are at
    BASE + t, the last one BEHIND them. First a record of the seven's and one of the
    straggler's, each setting a timer just after it."""
    keyed.executor.process(Record("seven", {}, BASE + 1000, "clicks", "id-s"))
    keyed.executor.process(Record("straggler", {}, BASE - BEHIND + 1000, "clicks", "id-t"))
    (watermark,) = [inp.watermark for inp in keyed.inputs]
    for t in range(seconds + 1):
        clock.now = t
        for r in range(SOURCES):
            at = BASE + t * 1000 - (BEHIND if r == SOURCES - 1 else 0)
            watermark.offer(
                Mark(repartition_producer("c", "clicks", r), at, False, {}, read=100 * t)
            )
        keyed.tick()


def test_a_percentile_task_fires_on_the_seven_and_publishes_the_strict_watermark(tmp_path):
    keyed, clock = task(tmp_path, Percentile(0.85))
    feed(keyed, clock)
    executor, now = keyed.executor, BASE + 60_000
    assert (executor.input_watermark, executor.strict_watermark) == (now, now - BEHIND)
    assert list(executor.timers.pending()) == []  # both fired
    executor.process(Record("u1", {}, now - BEHIND + 10, "clicks", "id-1"))  # the straggler's
    executor.process(Record("u2", {}, now - BEHIND - 10, "clicks", "id-2"))  # late anyway
    executor.process(Record("u3", {}, now + 5, "clicks", "id-3"))
    assert (executor.late_records, executor.percentile_late) == (2, 1)
    published, _, observed, _, late = keyed.mark_state()
    assert (published, observed, late) == (now - BEHIND, now, 1)


def test_the_default_strict_watermark_waits_for_the_straggler(tmp_path):
    keyed, clock = task(tmp_path, None)
    feed(keyed, clock)
    executor, now = keyed.executor, BASE + 60_000
    assert executor.input_watermark == executor.strict_watermark == now - BEHIND
    assert [key for key, _ in executor.timers.pending()] == ["seven"]  # it waits
    executor.process(Record("u1", {}, now - BEHIND + 10, "clicks", "id-1"))
    assert (executor.late_records, executor.percentile_late) == (0, 0)


def test_a_new_owner_resumes_the_hooks_watermark_and_the_late_count(tmp_path):
    keyed, clock = task(tmp_path, Percentile(0.85))
    mark = Mark("c/task/0", BASE - BEHIND, False, {}, BASE, percentile_late=7)
    keyed.resume(mark)
    executor = keyed.executor
    assert (executor.input_watermark, executor.percentile_late) == (BASE, 7)
    assert executor.strict_watermark == BASE - BEHIND  # at least what its owner published
    assert keyed.mark_state()[0] == BASE - BEHIND  # not the percentile one it resumed
