"""The task manager with fake clients: the rebalance callback only registers (assign at the
committed offsets, paused); restore happens in `step`, in the loop; revocation mid-restore
stops it. (Restore inside the callback could outlive max.poll.interval.ms.)"""

from __future__ import annotations

from confluent_kafka import TopicPartition

from framework.core.dead_letters import ErrorPolicy
from framework.kafka.output import Runtime
from framework.streaming.task import KeyedTask
from framework.streaming.task_manager import TaskManager
from jobs.wordcount import build
from tests.unit.streaming.fakes import FakeCollector, FakeConsumer


class FakeRestorer:
    def __init__(self):
        self.added: dict[int, object] = {}
        self.removed: list[int] = []
        self.done: list[int] = []

    def add(self, partition, store, standby=False):
        self.added[partition] = store

    def remove(self, partition):
        self.removed.append(partition)
        self.added.pop(partition, None)

    def restoring(self):
        return bool(self.added)

    def busy(self):
        return bool(self.added)

    def step(self, timeout=0.0):
        done = [(p, self.added.pop(p)) for p in self.done if p in self.added]
        self.done = []
        return done


class FakeChannels:
    def catch_up(self):
        pass

    def latest(self, channel, producer):
        return None

    def listen(self, channels, published):
        pass

    def forget(self, published):
        pass


def manager(tmp_path, committed=None):
    pipeline = build("tm", "tm-")
    spec = pipeline["count-words"]
    rt = Runtime(pipeline, spec, FakeCollector(), {"tm-words": 4}, ErrorPolicy("tm", "skip"))
    consumer, restorer = FakeConsumer(committed or {}), FakeRestorer()
    tm = TaskManager(rt, consumer, FakeChannels(), restorer, tmp_path)
    return tm, consumer, restorer


def test_assignment_registers_paused_partitions_and_restores_nothing(tmp_path):
    tm, consumer, restorer = manager(tmp_path, {("tm-words", 1): 42})
    tm.assigned([TopicPartition("tm-words", 1)])
    assert consumer.calls == [("assign", [("tm-words", 1, 42)])]
    assert consumer.paused == {("tm-words", 1)}
    assert restorer.added == {} and tm.running() == []


def test_restore_runs_in_the_loop_then_the_task_runs_from_its_committed_offset(tmp_path):
    tm, consumer, restorer = manager(tmp_path, {("tm-words", 1): 42})
    tm.assigned([TopicPartition("tm-words", 1)])
    tm.step()
    assert list(restorer.added) == [1] and tm.running() == []
    assert consumer.paused == {("tm-words", 1)}, "a restoring task's input must stay paused"
    restorer.done = [1]
    tm.step()
    (task,) = tm.running()
    assert isinstance(task, KeyedTask) and task.partition == 1
    assert ("seek", ("tm-words", 1, 42)) in consumer.calls
    assert consumer.paused == set()
    assert tm.routes[("tm-words", 1)][1].position == 42
    tm.close()


def test_revocation_during_restore_stops_it(tmp_path):
    tm, consumer, restorer = manager(tmp_path)
    tm.assigned([TopicPartition("tm-words", 2)])
    tm.step()
    tm.revoked([TopicPartition("tm-words", 2)])
    assert restorer.removed == [2] and tm.restoring == {} and tm.waiting == {}


def test_a_coordinator_that_cannot_say_the_committed_offsets_means_rejoin(tmp_path):
    """Seen in the seeded chaos run: `committed()` in the rebalance callback failed with
    NOT_COORDINATOR while the broker restarted, and `poll` raised it as a bare KafkaError,
    which ended the process; it is a Rejoin."""
    import pytest
    from confluent_kafka import KafkaError, KafkaException

    from framework.errors import Rejoin

    tm, consumer, _ = manager(tmp_path)

    def fails(tps, timeout):
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))

    consumer.committed = fails
    with pytest.raises(Rejoin, match="NOT_COORDINATOR|Not coordinator|committed"):
        tm.assigned([TopicPartition("tm-words", 1)])
