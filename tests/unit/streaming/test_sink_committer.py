"""A sink's commit (framework/streaming/sink_committer.py), on real sink tasks over stand-in
clients: each task writes what it gathered first, then the group's offsets are committed —
only those of partitions whose target moved since the last commit, each carrying the
instance and the commit's time; it never aborts, not for a held partition nor for a group
commit that fails, which is logged and tried again at the next commit."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from prometheus_client import REGISTRY

import framework.kafka.groups as groups
from framework import Pipeline
from framework.core.dead_letters import ErrorPolicy
from framework.kafka.output import PartIO
from framework.sinks import Unavailable
from framework.streaming.holds import Holds
from framework.streaming.sink_committer import SinkCommitter
from framework.streaming.sink_task_manager import SinkTaskManager
from tests.unit.streaming.fakes import Clock, FakeCollector, FakeConsumer
from tests.unit.streaming.test_sink_task import RecordingSink

TOPIC = "orders"
NOW_MS = 1_700_000_000_123


class Group(FakeConsumer):
    """A group member's consumer whose commits are written down with their metadata; `fail`,
    if set, is raised by every commit."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[list[tuple]] = []
        self.fail: KafkaException | None = None

    def commit(self, offsets=None, asynchronous=True):
        if self.fail is not None:
            raise self.fail
        self.commits.append(
            [(tp.topic, tp.partition, tp.offset, json.loads(tp.metadata)) for tp in offsets]
        )


class Parts:
    """A sink `db` of pipeline shop reading orders 0 and 1, its partitions opened, and its
    committer."""

    def __init__(self) -> None:
        pipeline = Pipeline("shop", partitions=2).source(TOPIC)
        pipeline.sink("db", inputs={TOPIC: None}, sink=RecordingSink(batch=100))
        spec = pipeline.part("db")
        self.sink, self.consumer = spec.sink, Group()
        io = PartIO(pipeline, spec, FakeCollector(), {}, ErrorPolicy(spec.group, spec.on_error))
        self.tasks = SinkTaskManager(io, self.consumer, Holds(spec, self.consumer, Clock()))
        self.tasks.assigned([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        self.tasks.step()
        self.committer = SinkCommitter(spec.group, spec.name, self.consumer, "shop.db.pod-1")

    def read(self, partition: int, keys: str) -> None:
        """Records `keys` appended to the partition, and gathered by its task."""
        self.consumer.add(TOPIC, partition, keys)
        task, inp = self.tasks.routes[(TOPIC, partition)]
        task.handle_run(self.consumer.records[(TOPIC, partition)][inp.position :], inp)

    def commit(self) -> bool:
        return self.committer.commit(self.tasks.running(), self.tasks.inputs())

    def committed(self) -> list[list[tuple]]:
        """The group commits: (topic, partition, offset) of each."""
        return [[(t, p, o) for t, p, o, _ in commit] for commit in self.consumer.commits]


@pytest.fixture(autouse=True)
def fixed_time(monkeypatch):
    monkeypatch.setattr(groups, "now_ms", lambda: NOW_MS)


def test_the_tasks_write_first_and_then_the_group_commits_where_each_target_stands():
    parts = Parts()
    parts.read(0, "abc")
    parts.read(1, "d")
    assert parts.commit() is True
    assert parts.sink.writes() == [
        (0, ["orders/0/0", "orders/0/1", "orders/0/2"], 3),
        (1, ["orders/1/0"], 1),
    ]
    assert parts.committed() == [[(TOPIC, 0, 3), (TOPIC, 1, 1)]]
    metadata = {"committed_at": NOW_MS, "instance": "shop.db.pod-1"}  # for `logwheel status`
    assert [m for *_, m in parts.consumer.commits[0]] == [metadata, metadata]


def test_only_partitions_whose_target_moved_since_the_last_commit_are_committed():
    parts = Parts()
    parts.read(0, "ab")
    parts.read(1, "c")
    parts.commit()
    parts.read(0, "d")
    before = parts.committer.last_commit
    parts.commit()
    assert parts.committer.last_commit > before  # the membership's commit interval restarts
    parts.commit()  # nothing moved: no commit at all
    parts.read(1, "ef")
    parts.commit()
    assert parts.committed() == [
        [(TOPIC, 0, 2), (TOPIC, 1, 1)],
        [(TOPIC, 0, 3)],
        [(TOPIC, 1, 3)],
    ]


def test_a_partition_whose_target_does_not_answer_is_held_and_the_commit_goes_on():
    parts = Parts()
    parts.read(0, "ab")
    parts.read(1, "c")
    parts.commit()
    parts.read(0, "d")
    parts.read(1, "e")
    parts.sink.failures = [Unavailable("connection refused")]  # partition 0's write, first
    assert parts.commit() is True  # never aborts: what the target has, it has
    assert parts.committed() == [[(TOPIC, 0, 2), (TOPIC, 1, 1)], [(TOPIC, 1, 2)]]
    task, inp = parts.tasks.routes[(TOPIC, 0)]
    assert inp.paused and task.written == 2 and [r.id for _, r in task.batch] == ["orders/0/2"]


def test_a_failed_group_commit_is_logged_not_raised_and_committed_at_the_next_commit(caplog):
    parts = Parts()
    parts.read(0, "ab")
    parts.consumer.fail = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
    commits = {"computation": "db"}
    before = REGISTRY.get_sample_value("logwheel_commits_total", commits) or 0
    with caplog.at_level("WARNING"):
        assert parts.commit() is True
    assert "shop.db: group offset not committed:" in caplog.text
    assert "broker down" in caplog.text
    assert parts.sink.offsets == {(TOPIC, 0): 2}  # the target's commit stands
    parts.consumer.fail = None
    parts.commit()  # nothing new written: the offset not told yet is told now
    assert parts.committed() == [[(TOPIC, 0, 2), (TOPIC, 1, 0)]]
    assert REGISTRY.get_sample_value("logwheel_commits_total", commits) == before + 2


def test_leaving_without_a_commit_commits_nothing():
    parts = Parts()
    parts.read(0, "ab")
    parts.committer.abandon()
    assert parts.consumer.commits == [] and parts.sink.writes() == []
    assert parts.committer.marks_moved(parts.tasks.running()) is False  # it publishes none
