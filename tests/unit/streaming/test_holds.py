"""A partition whose next record needs a registry that does not answer is held at that record
(paused, its fetch position moved back to it, its watermark kept) and read again with
backoff, while the other partitions flow; the outage is logged once when it begins and once
when it ends. The consumer is a stand-in (tests/unit/streaming/fakes.py); the same on a real
broker and registry: tests/integration/test_registry_outage.py."""

from __future__ import annotations

import json
import logging

from confluent_kafka import Message

from framework import BoundedOutOfOrderness, Computation, Pipeline
from framework.core.dead_letters import ErrorPolicy
from framework.core.timers import decode_timer
from framework.kafka.output import PartIO
from framework.kafka.schema_registry import RegistryUnavailable
from framework.state.store import TaskStore
from framework.streaming.holds import Holds, backoff
from framework.streaming.pacing import Pacer
from framework.streaming.task import KeyedTask
from tests.unit.streaming.fakes import FakeCollector, FakeConsumer

URL = "http://registry.test:8081"
SEEN: list[str] = []


class Collect(Computation):
    def process_record(self, ctx, record):
        SEEN.append(record.value["v"])


class NeedsTheRegistryInItsHook(Computation):
    """Meets the registry in its hook, as a table row of a new schema id does."""

    away: set[str] = set()

    def process_record(self, ctx, record):
        if record.value["v"] in self.away:
            raise RegistryUnavailable(URL, f"the Schema Registry at {URL} does not answer")
        SEEN.append(record.value["v"])


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _task(tmp_path, down: set[str], computation: type[Computation] = Collect) -> KeyedTask:
    """A keyed task of partition 0 of "in" and "other"; values named in `down` need the
    registry, which does not answer while `down` holds them."""
    pipeline = Pipeline("holds", partitions=1)
    pipeline.source("in", watermark=BoundedOutOfOrderness(ms=10))
    pipeline.source("other", watermark=BoundedOutOfOrderness(ms=10))
    pipeline.computation("c", computation, inputs={"in": None, "other": None})
    spec = pipeline["c"]
    io = PartIO(pipeline, spec, FakeCollector(), {"in": 1, "other": 1}, ErrorPolicy("h", "skip"))
    task = KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))

    def decode(raw: bytes):
        value = json.loads(raw)
        if value["v"] in down:
            raise RegistryUnavailable(URL, f"the Schema Registry at {URL} does not answer")
        return value

    for inp in task.inputs:
        inp.decode = decode
    return task


def _msg(topic: str, offset: int, v: str) -> Message:
    value = json.dumps({"v": v}).encode()
    return Message(topic=topic, partition=0, offset=offset, value=value, timestamp=(1, offset))


def test_backoff_doubles_from_half_a_second_up_to_thirty():
    assert [backoff(n) for n in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert backoff(10_000) == 30


def test_a_held_partition_waits_at_its_record_and_goes_on_once_the_registry_answers(
    tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="framework.streaming.holds")
    SEEN.clear()
    down = {"v2"}
    task = _task(tmp_path, down)
    main, other = task.inputs
    routes = {("in", 0): (task, main), ("other", 0): (task, other)}
    consumer, clock = FakeConsumer(), Clock()
    holds = Holds(task.io.spec, consumer, clock)
    pacer = Pacer(consumer, holds)
    batch = [
        _msg("in", 5, "v1a"),
        _msg("in", 6, "v2"),  # a schema id not cached: the registry is needed, and away
        _msg("in", 7, "v1b"),
        _msg("other", 3, "o1"),
        _msg("in", 8, "v1c"),  # a later run of the held partition: read again after it
    ]
    pacer.route(batch, routes)
    # in time order (the task's inputs are paced): nothing after the held record, the other
    # partition flows
    assert SEEN == ["o1", "v1a"]
    assert (main.position, other.position) == (6, 4)
    assert consumer.paused == {("in", 0)} and consumer.calls == [("seek", ("in", 0, 6))]
    assert ("in", 0) in holds and main.frozen == (5 - 10, False)
    for inp in task.inputs:  # a held partition's watermark stays where it was
        inp.watermark.observe(10_000)
    assert task.input_watermark() == (-5, False)

    clock.now += 0.4
    holds.step(routes)
    assert consumer.paused == {("in", 0)}  # the first retry comes after 0.5 s
    clock.now += 0.1
    holds.step(routes)
    assert consumer.paused == set()
    pacer.route(batch[1:3], routes)  # read again: still away
    assert consumer.paused == {("in", 0)} and main.position == 6
    clock.now += 0.9
    holds.step(routes)
    assert consumer.paused == {("in", 0)}  # the second waits 1 s
    clock.now += 0.1
    holds.step(routes)
    down.clear()  # the registry answers
    pacer.route([batch[1], batch[2], batch[4]], routes)
    holds.step(routes)
    assert SEEN == ["o1", "v1a", "v2", "v1b", "v1c"]  # each once, in order
    assert main.position == 9 and ("in", 0) not in holds and main.frozen is None
    lines = [r.getMessage() for r in caplog.records]
    began = [line for line in lines if "does not answer" in line]
    assert len(began) == 1 and URL in began[0] and "in[0] at offset 6" in began[0], lines
    ended = [line for line in lines if "answers again" in line]
    assert len(ended) == 1 and "(1 retries)" in ended[0], lines


def test_a_route_rebuilt_after_an_aborted_commit_ends_the_hold(tmp_path):
    task = _task(tmp_path, {"v2"})
    consumer = FakeConsumer()
    holds = Holds(task.io.spec, consumer, Clock())
    pacer = Pacer(consumer, holds)
    main = task.inputs[0]
    pacer.route([_msg("in", 6, "v2")], {("in", 0): (task, main)})
    assert ("in", 0) in holds
    rebuilt = _task(tmp_path / "again", {"v2"}).inputs[0]  # the rewind's new task
    holds.step({("in", 0): (task, rebuilt)})
    assert ("in", 0) not in holds and not rebuilt.paused


def test_a_hook_that_meets_the_registry_away_holds_at_its_record_after_the_ones_before(tmp_path):
    SEEN.clear()
    NeedsTheRegistryInItsHook.away = {"v2"}
    task = _task(tmp_path, set(), NeedsTheRegistryInItsHook)
    main = task.inputs[0]
    consumer = FakeConsumer()
    pacer = Pacer(consumer, Holds(task.io.spec, consumer, Clock()))
    batch = [_msg("in", 5, "v1a"), _msg("in", 6, "v2"), _msg("in", 7, "v1b")]
    pacer.route(batch, {("in", 0): (task, main)})
    # v1a is handled (its effects stay in the open transaction): read again, it would count twice
    assert SEEN == ["v1a"] and main.position == 6
    assert consumer.calls == [("seek", ("in", 0, 6))]


def test_a_hold_drops_what_the_pacer_parked_past_the_held_record(tmp_path):
    """Parked past the held record, those records are fetched again after the resume: kept
    too, they would be handled twice."""
    SEEN.clear()
    task = _task(tmp_path, {"v2"})
    main, other = task.inputs
    routes = {("in", 0): (task, main), ("other", 0): (task, other)}
    consumer, clock = FakeConsumer(), Clock()
    consumer.records[("other", 0)] = [_msg("other", o, "o") for o in range(5)]  # more to come
    holds = Holds(task.io.spec, consumer, clock)
    pacer = Pacer(consumer, holds)
    pacer.route([_msg("other", 0, "o0")], routes)
    # "other" is at 0: "in" may go up to 1,000, so its record at 3,000 stays parked
    pacer.route([_msg("in", 5, "v1a"), _msg("in", 6, "v2"), _msg("in", 3_000, "v9")], routes)
    assert SEEN == ["o0", "v1a"] and ("in", 0) in holds
    assert main.parked == [] and not main.throttled
