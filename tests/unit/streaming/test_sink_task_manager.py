"""A sink's partitions in one membership (framework/streaming/sink_task_manager.py), on
stand-in clients: an `open` that fails is asked again once its backoff has passed on the
holds' clock, and not before, while a configuration error from it is raised; a partition
starts where its target stands, else where the group stands, else at its start; a revoked
partition's task goes with its unwritten batch; `close` closes the sink once, whatever the
sink raises."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from framework import Pipeline, PipelineError
from framework.core.dead_letters import ErrorPolicy
from framework.errors import ConfigurationError, Rejoin
from framework.kafka.output import PartIO
from framework.sinks import Unavailable
from framework.streaming.holds import Holds
from framework.streaming.sink_task_manager import SinkTaskManager
from tests.unit.streaming.fakes import Clock, FakeCollector, FakeConsumer
from tests.unit.streaming.test_sink_task import RecordingSink

TOPIC = "orders"


def _manager(sink: RecordingSink, consumer: FakeConsumer, clock: Clock | None = None):
    pipeline = Pipeline("shop", partitions=2).source(TOPIC)
    pipeline.sink("db", inputs={TOPIC: None}, sink=sink)
    spec = pipeline.part("db")
    io = PartIO(pipeline, spec, FakeCollector(), {}, ErrorPolicy(spec.group, spec.on_error))
    return SinkTaskManager(io, consumer, Holds(spec, consumer, clock or Clock()))


def _assign(manager: SinkTaskManager, *partitions: int) -> None:
    manager.assigned([TopicPartition(TOPIC, p) for p in partitions])


def _opens(sink: RecordingSink) -> int:
    return sum(1 for call in sink.calls if call[0] == "open")


def test_an_open_that_fails_is_asked_again_after_its_backoff_on_the_holds_clock_not_before():
    sink, consumer, clock = RecordingSink(), FakeConsumer(), Clock(100.0)
    sink.open_failures = [Unavailable("connection refused"), OSError("no route to host")]
    manager = _manager(sink, consumer, clock)
    _assign(manager, 0)
    assert manager.waiting == [(TOPIC, 0)]
    manager.step()
    asked = [_opens(sink)]
    for now in (100.49, 100.5, 101.49, 101.5):  # backoffs of 0.5 s, then 1 s
        clock.now = now
        waiting = bool(manager.waiting)
        manager.step()
        asked.append(_opens(sink))
        assert waiting == (asked[-1] > asked[-2]), now
    assert asked == [1, 1, 2, 2, 3]
    assert list(manager.tasks) == [(TOPIC, 0)] and not manager.opening
    # paused from its assignment until it was opened, then read from where it stands
    assert [e[1:] for e in consumer.events] == [("pause", (TOPIC, 0)), ("resume", (TOPIC, 0))]
    assert ("seek", (TOPIC, 0, 0)) in consumer.calls


def test_a_configuration_error_from_open_is_raised_and_nothing_is_read():
    sink, consumer, clock = RecordingSink(), FakeConsumer(), Clock()
    sink.open_failures = [Unavailable("starting"), PipelineError("no table paid: create it")]
    manager = _manager(sink, consumer, clock)
    _assign(manager, 0)
    manager.step()
    clock.now += 0.5
    with pytest.raises(ConfigurationError, match="^no table paid: create it$"):
        manager.step()
    assert manager.tasks == {} and (TOPIC, 0) in consumer.paused
    assert not any(call[0] == "seek" for call in consumer.calls)


class Ends(FakeConsumer):
    """A consumer whose partitions start at `low` (records before it deleted), and whose
    group reads fail with `fail`, if set."""

    def __init__(self, committed=None, low: int = 0) -> None:
        super().__init__(committed)
        self.low = low
        self.fail: KafkaException | None = None

    def committed(self, tps, timeout):
        if self.fail is not None:
            raise self.fail
        return super().committed(tps, timeout)

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return (self.low, self.low + 10)


@pytest.mark.parametrize(
    ("target", "group", "low", "start"),
    [
        (5, {(TOPIC, 0): 2}, 0, 5),  # the target's offset, whatever the group says
        (0, {(TOPIC, 0): 2}, 0, 0),  # an offset of 0 is one
        (None, {(TOPIC, 0): 2}, 0, 2),  # none: where the group stands
        (None, {(TOPIC, 0): 0}, 7, 0),
        (None, {}, 7, 7),  # nor the group: the partition's start, records deleted before it
        (None, {}, -1, OFFSET_BEGINNING),  # its start unknown
    ],
)
def test_a_partition_starts_where_its_target_stands_else_its_group_else_its_start(
    target, group, low, start
):
    sink, consumer = RecordingSink(), Ends(group, low)
    if target is not None:
        sink.offsets[(TOPIC, 0)] = target
    manager = _manager(sink, consumer)
    _assign(manager, 0)
    manager.step()
    assert consumer.calls[-1] == ("seek", (TOPIC, 0, start))
    task, inp = manager.routes[(TOPIC, 0)]
    assert (task.written, inp.position) == (start, start)


def test_a_group_that_cannot_be_read_ends_the_membership():
    sink, consumer = RecordingSink(), Ends()
    consumer.fail = KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator away"))
    manager = _manager(sink, consumer)
    _assign(manager, 0)
    with pytest.raises(Rejoin, match=r"reading where orders\[0\] stands: .*coordinator away"):
        manager.step()


def test_a_revoked_partition_goes_with_its_unwritten_batch_and_the_others_stay():
    sink, consumer = RecordingSink(batch=10), FakeConsumer()
    consumer.add(TOPIC, 0, "abc")
    consumer.add(TOPIC, 1, "d")
    manager = _manager(sink, consumer)
    _assign(manager, 0, 1)
    manager.step()
    for task, inp in manager.routes.values():
        task.handle_run(consumer.records[(inp.topic, inp.partition)], inp)
    assert len(manager.tasks[(TOPIC, 0)].batch) == 3  # gathered, not written
    manager.revoked([TopicPartition(TOPIC, 0)])
    assert list(manager.tasks) == list(manager.routes) == [(TOPIC, 1)]
    assert [inp.partition for inp in manager.inputs()] == [1]
    for task in manager.running():
        task.prepare_commit()
    assert sink.writes() == [(1, ["orders/1/0"], 1)]  # nothing of partition 0's batch
    # assigned again, it is opened afresh and read again from where its target stands
    _assign(manager, 0)
    manager.step()
    task, inp = manager.routes[(TOPIC, 0)]
    assert (task.batch, task.written, inp.position) == ([], 0, 0)
    assert _opens(sink) == 3


def test_a_partition_revoked_before_it_opened_is_not_asked_for_again():
    sink, consumer, clock = RecordingSink(), FakeConsumer(), Clock()
    sink.open_failures = [Unavailable("connection refused")]
    manager = _manager(sink, consumer, clock)
    _assign(manager, 0)
    manager.step()
    manager.revoked([TopicPartition(TOPIC, 0)])
    clock.now += 60
    manager.step()
    assert _opens(sink) == 1 and manager.waiting == [] and manager.tasks == {}


class Closing(RecordingSink):
    def __init__(self, error: BaseException | None = None) -> None:
        super().__init__()
        self.error = error

    def close(self) -> None:
        super().close()
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize("error", [None, RuntimeError("connection already closed")])
def test_close_closes_the_sink_once_and_lets_its_tasks_go_whatever_the_sink_raises(error, caplog):
    sink, consumer = Closing(error), FakeConsumer()
    manager = _manager(sink, consumer)
    _assign(manager, 0, 1)
    manager.step()
    _assign(manager, 2)  # not opened yet
    with caplog.at_level("WARNING"):
        manager.close()
    assert sink.closed == 1
    assert (manager.tasks, manager.routes, manager.opening) == ({}, {}, {})
    closing = [r.getMessage() for r in caplog.records if "closing the sink" in r.getMessage()]
    assert closing == (
        [] if error is None else ["shop.db: closing the sink: connection already closed"]
    )
