"""The task manager with fake clients: the rebalance callback only registers (assign at the
committed offsets, paused); restore happens in `step`, in the loop; revocation mid-restore
stops it. (Restore inside the callback could outlive max.poll.interval.ms.)"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from framework.core.dead_letters import ErrorPolicy
from framework.core.timers import decode_timer
from framework.errors import Retry
from framework.kafka.output import PartIO
from framework.state.store import TaskStore
from framework.streaming.task import KeyedTask
from framework.streaming.task_manager import TaskManager
from jobs.wordcount import build
from tests.unit.streaming.fakes import (
    FakeAdmin,
    FakeChannels,
    FakeCollector,
    FakeConsumer,
    FakeRestorer,
)


def manager(tmp_path, committed=None):
    pipeline = build("tm", "tm-")
    spec = pipeline["count-words"]
    io = PartIO(pipeline, spec, FakeCollector(), {"tm-words": 4}, ErrorPolicy("tm", "skip"))
    consumer, restorer = FakeConsumer(committed or {}), FakeRestorer()
    tm = TaskManager(io, consumer, FakeAdmin(), FakeChannels(), restorer, tmp_path)
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


def test_the_idle_catch_up_of_positions_never_passes_records_the_pacer_holds(tmp_path):
    """The consumer's position is past the records parked by the pacer (fetched, not handled):
    taken as the task's, a commit would cover them, and a crash would lose them."""
    tm, consumer, restorer = manager(tmp_path, {("tm-words", 1): 42})
    tm.assigned([TopicPartition("tm-words", 1)])
    restorer.done = [1]
    tm.step()
    tm.step()
    inp = tm.routes[("tm-words", 1)][1]
    consumer.positions[("tm-words", 1)] = 50
    inp.parked = [object()]
    assert tm.catch_up_positions() == 0 and inp.position == 42
    inp.parked = []
    assert tm.catch_up_positions() == 1 and inp.position == 50
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
    from confluent_kafka import KafkaError, KafkaException

    from framework.errors import Rejoin

    tm, consumer, _ = manager(tmp_path)

    def fails(tps, timeout):
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))

    consumer.committed = fails
    with pytest.raises(Rejoin, match="NOT_COORDINATOR|Not coordinator|committed"):
        tm.assigned([TopicPartition("tm-words", 1)])


def test_a_seek_refused_for_a_partition_gone_with_a_fenced_member_means_rejoin(tmp_path):
    """Seen when a second process with the same instance id fenced this one: the seek of a
    restored task's input failed (_STATE, "Erroneous state") and ended the process."""
    from confluent_kafka import KafkaError, KafkaException

    from framework.errors import Rejoin

    tm, consumer, restorer = manager(tmp_path, {("tm-words", 1): 42})
    tm.assigned([TopicPartition("tm-words", 1)])
    tm.step()

    def refuses(tp):
        raise KafkaException(KafkaError(KafkaError._STATE, "Erroneous state"))

    consumer.seek = refuses
    restorer.done = [1]
    with pytest.raises(Rejoin, match="tm-words\\[1\\]"):
        tm.step()
    tm.close()


class UnreachableRestorer(FakeRestorer):
    """A restore that cannot start: the broker is down while it asks for the journals' ends."""

    def add(self, partition, store, standby=False):
        raise Retry("the broker is down")


def test_a_store_whose_restore_could_not_start_is_closed_with_the_membership(tmp_path):
    """Seen in the seeded chaos run: a restore that failed to start (the broker was down) left
    its store open and owned by nothing, and the next membership of the same process could not
    open it (RocksDB: "lock hold by current process"), which ended the process."""
    tm, _, _ = manager(tmp_path)
    tm.restorer = UnreachableRestorer()
    tm.assigned([TopicPartition("tm-words", 1)])
    with pytest.raises(Retry) as failure:  # its traceback holds what step made, as the runner's
        tm.step()
    tm.close()
    TaskStore(tmp_path / "task-1", decode_timer).close()
    del failure


def test_a_standby_whose_restore_could_not_start_is_closed_with_the_membership(tmp_path):
    tm, _, _ = manager(tmp_path)
    tm.standby, tm.restorer = 1, UnreachableRestorer()
    tm.assigned([TopicPartition("tm-words", 1)])
    with pytest.raises(Retry) as failure:
        tm.revoked([])  # balances the standbys: partition 2 follows the owned 1
    tm.close()
    TaskStore(tmp_path / "task-2", decode_timer).close()
    del failure
