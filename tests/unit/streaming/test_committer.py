"""The committer with fake clients: the order of a commit's steps, and what a failure does
(abortable: abort and re-run; a refusal of a record's content: remembered; else rejoin)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import REGISTRY

from framework.core.pipeline import Pipeline
from framework.core.watermarks import Unwatermarked
from framework.errors import Rejoin
from framework.streaming import committer as committer_mod
from framework.streaming.committer import Committer
from framework.streaming.input_partition import InputPartition
from tests.unit.streaming.fakes import FakeCollector, FakeConsumer

log: list[str] = []


class FakeTask:
    producer = "c/task/0"

    def __init__(self):
        self.state = (5, False, 3, 0, 0)  # Mark.state

    def prepare_commit(self):
        log.append("journals")

    def mark_state(self):
        return self.state

    def mark(self):
        from framework.core.watermarks import Mark

        return Mark(self.producer, 5, False, {}, 3)

    def committed(self):
        log.append("local state")


def committer():
    log.clear()
    spec = Pipeline("p").source("in").computation("c", object, inputs={"in": None})["c"]
    collector = FakeCollector(log)
    c = Committer(spec, collector, FakeConsumer(), "p.c.instance-1")
    inputs = [InputPartition("in", 0, "in", bytes, Unwatermarked(), [], position=7)]
    return c, collector, inputs


def test_the_steps_in_order_and_marks_only_when_they_moved():
    c, collector, inputs = committer()
    task = FakeTask()
    assert c.commit([task], inputs)
    assert log == [
        "init",
        "begin",
        "journals",
        "flush",
        "send p.c.watermarks",
        "offsets [('in', 0, 7)]",
        "commit",
        "local state",
        "begin",
    ]
    assert collector.producer.metadata["instance"] == "p.c.instance-1"
    assert not c.marks_moved([task])
    task.state = (6, False, 3, 0, 0)
    assert c.marks_moved([task])


def test_an_abortable_failure_aborts_and_asks_for_a_rerun():
    c, collector, inputs = committer()
    collector.producer.fail_commit = KafkaError(KafkaError._FENCED, txn_requires_abort=True)
    assert not c.commit([FakeTask()], inputs)
    assert log[-3:] == ["abort", "begin", "discard"] and "local state" not in log
    assert c.refusal is None


def test_a_refused_record_is_remembered_as_the_data_fault():
    c, collector, inputs = committer()
    collector.producer.fail_commit = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    assert not c.commit([FakeTask()], inputs)
    assert c.refusal is not None and c.refusal.code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_anything_else_ends_the_membership():
    c, collector, inputs = committer()
    collector.producer.fail_commit = KafkaError(KafkaError._FENCED, fatal=True)
    with pytest.raises(Rejoin, match="commit failed"):
        c.commit([FakeTask()], inputs)


def test_a_retriable_failure_of_the_commit_is_retried_in_the_same_transaction():
    c, collector, inputs = committer()
    fails = [KafkaError(KafkaError._TRANSPORT, retriable=True)] * 2
    producer = collector.producer

    def commit_transaction(timeout):
        if fails:
            raise KafkaException(fails.pop())
        log.append("commit")

    producer.commit_transaction = commit_transaction
    assert c.commit([FakeTask()], inputs)
    assert log.count("commit") == 1 and "abort" not in log and log[-2:] == ["local state", "begin"]


def test_a_slow_commit_is_logged_with_the_time_of_each_step(monkeypatch, caplog):
    """A stall in a job's output says nothing of where the job waited; a slow commit does."""
    c, collector, inputs = committer()
    slow = {"flush": 0.5, "send": 0.5, "offsets": 1.0, "commit": 63.0}
    for at, logged in [
        (slow, "a commit took 63.0s (writes 0.5s, offsets 0.5s, commit 62.0s)"),
        ({}, None),
    ]:
        # the clock stands where the last step the fake clients logged left it
        now = SimpleNamespace(monotonic=lambda at=at: at.get(log[-1].split()[0], 0.0))
        monkeypatch.setattr(committer_mod, "time", now)
        caplog.clear()
        with caplog.at_level("WARNING", logger=committer_mod.__name__):
            assert c.commit([FakeTask()], inputs)
        if logged:
            assert f"p.c: {logged}" in caplog.text
        else:
            assert "a commit took" not in caplog.text


def test_a_transactional_call_blocked_past_its_timeout_ends_the_membership(monkeypatch):
    """librdkafka#5456: `send_offsets_to_transaction` asked again after a time-out blocked for
    minutes. The membership ends instead (its producer left behind, the next one's
    `init_transactions` aborts what it had open), and its close does not wait on it again."""
    c, collector, inputs = committer()
    monkeypatch.setattr(committer_mod, "STEP_TIMEOUT_S", 0.1)
    monkeypatch.setattr(committer_mod, "LEFT_BEHIND_S", 0.2)
    release = threading.Event()
    given = []

    def send_offsets_to_transaction(offsets, group, timeout):
        given.append(timeout)
        release.wait()

    collector.producer.send_offsets_to_transaction = send_offsets_to_transaction
    with pytest.raises(Rejoin, match="send_offsets_to_transaction still blocked"):
        c.commit([FakeTask()], inputs)
    c.abandon()
    assert "abort" not in log
    release.set()
    assert given == [0.1], "a commit step's own timeout bounds it, not the retries' TIMEOUT_S"


def test_an_at_least_once_commit_blocked_past_its_bound_ends_the_membership(monkeypatch):
    """An at-least-once commit's synchronous `commit` waits for the group's coordinator, with
    no timeout of its own: left behind past TIMEOUT_S and the margin, named and counted."""
    log.clear()
    spec = (
        Pipeline("p")
        .source("in")
        .computation("c", object, inputs={"in": None}, guarantee="at_least_once")["c"]
    )
    consumer, release = FakeConsumer(), threading.Event()

    def commit(offsets, asynchronous):
        release.wait()

    consumer.commit = commit
    c = Committer(spec, FakeCollector(log), consumer, "p.c.instance-1")
    inputs = [InputPartition("in", 0, "in", bytes, Unwatermarked(), [], position=7)]
    monkeypatch.setattr(committer_mod, "TIMEOUT_S", 0.1)
    monkeypatch.setattr(committer_mod, "LEFT_BEHIND_S", 0.1)
    labels = {"computation": "c", "call": "commit"}
    before = REGISTRY.get_sample_value("logwheel_stuck_calls_total", labels) or 0
    with pytest.raises(Rejoin, match="commit still blocked 0.1 s past its 0.1 s timeout"):
        c.commit([FakeTask()], inputs)
    release.set()
    assert REGISTRY.get_sample_value("logwheel_stuck_calls_total", labels) == before + 1
