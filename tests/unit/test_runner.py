"""The runner outlives a broker that is down or restarting: starting and rejoining wait for it
instead of ending the process (found by the seeded chaos run: a process restarted during a
broker restart died in `create_topics` with a transport error)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

import framework.runner as runner_module
from framework import Computation, Pipeline
from framework.kafka import unreachable
from framework.runner import Runner


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def _pipeline() -> Pipeline:
    return Pipeline("p").source("in").computation("c", Noop, inputs={"in": None})


def _down() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))


def test_unreachable_tells_a_passing_outage_from_a_real_error():
    assert unreachable(_down())
    assert unreachable(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)))
    assert unreachable(TimeoutError("topics have no partition leaders"))
    assert not unreachable(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    assert not unreachable(KafkaException(KafkaError(KafkaError._TRANSPORT, fatal=True)))
    assert not unreachable(ValueError("bad config"))


class FakeMember:
    """Stands in for a group membership: counts joins, ends the run on the last."""

    joins = 0
    fail_joins = 0
    fail_runs = 0

    def __init__(self, runner, partitions, instance):
        if FakeMember.fail_joins:
            FakeMember.fail_joins -= 1
            raise _down()
        FakeMember.joins += 1

    def run(self, stop):
        if FakeMember.fail_runs:
            FakeMember.fail_runs -= 1
            raise _down()
        stop.set()

    def close(self, clean):
        pass


def test_start_and_rejoin_wait_for_the_broker(tmp_path, monkeypatch):
    starts = {"failures": 2, "calls": 0}

    def create_topics(*args, **kwargs):
        starts["calls"] += 1
        if starts["failures"]:
            starts["failures"] -= 1
            raise _down()

    monkeypatch.setattr(runner_module, "create_topics", create_topics)
    monkeypatch.setattr(Runner, "_partition_counts", lambda self: {"in": 4})
    monkeypatch.setattr(runner_module, "Member", FakeMember)
    monkeypatch.setattr(runner_module.time, "sleep", lambda s: None)
    FakeMember.joins, FakeMember.fail_joins, FakeMember.fail_runs = 0, 2, 1
    stop = threading.Event()
    waits = []
    monkeypatch.setattr(stop, "wait", lambda s: waits.append(s))

    Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path).run(stop)

    assert starts["calls"] == 3  # two transport failures, then started
    assert FakeMember.joins == 2  # a membership ended by the outage, then the next one
    assert len(waits) == 4  # waited after each failed start and each failed join


def test_other_errors_still_end_the_process(tmp_path, monkeypatch):
    def create_topics(*args, **kwargs):
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    monkeypatch.setattr(runner_module, "create_topics", create_topics)
    with pytest.raises(KafkaException):
        Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path).run(threading.Event())
