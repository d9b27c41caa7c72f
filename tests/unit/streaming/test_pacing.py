"""The pacer: a keyed task of two inputs handles their records in step by event time, whatever
order the consumer fetches them in; it waits a bounded time for an input with records still to
fetch; a partition with too many parked records stops fetching past them; parked records are
never committed past."""

from __future__ import annotations

import json

from confluent_kafka import Message

from framework import BoundedOutOfOrderness, Computation, Pipeline
from framework.core.dead_letters import ErrorPolicy
from framework.core.timers import decode_timer
from framework.kafka.output import PartIO
from framework.state.store import TaskStore
from framework.streaming.holds import Holds
from framework.streaming.pacing import DRIFT_MS, PARKED_MAX, WAIT_S, Pacer, unread
from framework.streaming.task import KeyedTask
from tests.unit.streaming.fakes import FakeCollector, FakeConsumer

SEEN: list[tuple[str, int]] = []


class Collect(Computation):
    def process_record(self, ctx, record):
        SEEN.append((record.stream, record.timestamp))


def _task(tmp_path) -> KeyedTask:
    pipeline = Pipeline("pacing", partitions=1)
    for stream in ("a", "b"):
        pipeline.source(stream, watermark=BoundedOutOfOrderness(ms=10))
    pipeline.computation("c", Collect, inputs={"a": None, "b": None})
    spec = pipeline["c"]
    io = PartIO(pipeline, spec, FakeCollector(), {"a": 1, "b": 1}, ErrorPolicy("c", "skip"))
    return KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))


def _msgs(topic: str, times: list[int], first: int = 0) -> list[Message]:
    return [
        Message(
            topic=topic,
            partition=0,
            offset=first + i,
            value=json.dumps({}).encode(),
            timestamp=(1, t),
        )  # fmt: skip
        for i, t in enumerate(times)
    ]


def _setup(tmp_path, logs: dict[str, list[Message]] | None = None):
    SEEN.clear()
    task = _task(tmp_path)
    consumer = FakeConsumer()
    for topic, log in (logs or {}).items():
        consumer.records[(topic, 0)] = log
    a, b = task.inputs
    routes = {("a", 0): (task, a), ("b", 0): (task, b)}
    clock = [0.0]
    pacer = Pacer(consumer, Holds(task.io.spec, consumer), clock=lambda: clock[0])
    return task, consumer, routes, pacer, clock


def test_a_backlog_fetched_one_input_after_the_other_is_handled_in_step_by_time(tmp_path):
    """Without the pacer every record of "a" would come before any of "b"."""
    a_log, b_log = _msgs("a", list(range(0, 60_000, 500))), _msgs("b", list(range(0, 60_000, 700)))
    task, consumer, routes, pacer, _ = _setup(tmp_path, {"a": a_log, "b": b_log})
    pacer.route(a_log, routes)  # the whole of "a" first: "b" has records to fetch, so it waits
    assert SEEN == [] and pacer.pending
    pacer.route(b_log, routes)
    assert not pacer.pending and len(SEEN) == len(a_log) + len(b_log)
    for i, (_, t) in enumerate(SEEN):
        assert all(t >= u - DRIFT_MS for _, u in SEEN[:i]), (i, t)
    for stream, log in (("a", a_log), ("b", b_log)):  # each partition in its own order
        assert [t for s, t in SEEN if s == stream] == [m.timestamp()[1] for m in log]
    assert [inp.position for inp in task.inputs] == [len(a_log), len(b_log)]


def test_an_input_with_records_to_fetch_is_waited_for_a_bounded_time(tmp_path):
    a_log, b_log = _msgs("a", [1_000, 2_000]), _msgs("b", [500, 9_000])
    task, consumer, routes, pacer, clock = _setup(tmp_path, {"a": a_log, "b": b_log})
    pacer.route(a_log, routes)
    clock[0] = WAIT_S - 0.1
    assert pacer.route([], routes) == 0 and SEEN == []
    clock[0] = WAIT_S  # "b" still has nothing fetched: the task goes on without it
    assert pacer.route([], routes) == 2 and SEEN == [("a", 1_000), ("a", 2_000)]
    later = _msgs("a", [3_000], first=2)
    assert pacer.route(later, routes) == 1  # and does not wait again while "b" has nothing
    pacer.route(b_log, routes)
    assert SEEN[-2:] == [("b", 500), ("b", 9_000)]


def test_an_input_caught_up_holds_nothing_back(tmp_path):
    a_log = _msgs("a", [1_000, 2_000])
    task, consumer, routes, pacer, _ = _setup(tmp_path, {"a": a_log})  # "b" is empty
    assert not unread(consumer, task.inputs[1])
    assert pacer.route(a_log, routes) == 2 and not pacer.pending


def test_a_partition_with_too_many_parked_records_stops_fetching_past_them(tmp_path):
    a_log = _msgs("a", [10_000 + i for i in range(PARKED_MAX + 10)])
    b_log = _msgs("b", [0, 20_000])
    task, consumer, routes, pacer, _ = _setup(tmp_path, {"a": a_log, "b": b_log})
    consumer.assign([*(_tp(t) for t in "ab")])
    pacer.route(a_log[:PARKED_MAX], routes)
    a = task.inputs[0]
    assert a.throttled and ("a", 0) in consumer.paused
    assert ("seek", ("a", 0, PARKED_MAX)) in consumer.calls
    pacer.route(a_log[PARKED_MAX:], routes)  # fetched before the pause took: read again later
    assert len(a.parked) == PARKED_MAX
    # the consumer is past the parked records; the task is not, and neither is a commit
    assert a.position == 0
    pacer.route(b_log[:1], routes)  # "b" at 0 lets "a" go up to DRIFT_MS: not to 10,000
    assert a.throttled and len(a.parked) == PARKED_MAX
    pacer.route(b_log[1:], routes)  # "b" at 20,000: "a" goes on and fetches again
    assert not a.throttled and ("a", 0) not in consumer.paused and a.position == PARKED_MAX


def test_the_search_for_a_refused_record_gets_the_parked_records_back(tmp_path):
    a_log, b_log = _msgs("a", [5_000]), _msgs("b", [0])
    task, consumer, routes, pacer, _ = _setup(tmp_path, {"a": a_log, "b": b_log})
    pacer.route(a_log, routes)
    assert [m.offset() for m in pacer.release(routes)] == [0] and not task.inputs[0].parked
    assert not pacer.pending


def _tp(topic: str):
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, 0, 0)
