"""The runner outlives a broker that is down or restarting: starting and rejoining wait for it
instead of ending the process (found by the seeded chaos run: a process restarted during a
broker restart died in `create_topics` with a transport error)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

import framework.streaming.lifetime as lifetime
from framework import Computation, Pipeline
from framework.kafka.errors import Unreachable
from framework.streaming.join import describe_timeout
from framework.streaming.lifetime import Runner


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def _pipeline() -> Pipeline:
    return Pipeline("p").source("in").computation("c", Noop, inputs={"in": None})


def _down() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))


class FakeMembership:
    """Stands in for a group membership: counts joins, ends the run on the last."""

    joins = 0
    fail_joins = 0
    fail_runs = 0
    describe_bounds: list[float] = []

    @classmethod
    def join(cls, *args, describe_s, **kwargs):
        cls.describe_bounds.append(describe_s)
        if cls.fail_joins:
            cls.fail_joins -= 1
            raise _down()
        cls.joins += 1
        return cls()

    def run(self, stop):
        if FakeMembership.fail_runs:
            FakeMembership.fail_runs -= 1
            raise Unreachable("ended by the outage")  # what `run` makes of a transport failure
        stop.set()


def test_start_and_rejoin_wait_for_the_broker(tmp_path, monkeypatch):
    starts = {"failures": 2, "calls": 0}

    def create_topics(*args, **kwargs):
        starts["calls"] += 1
        if starts["failures"]:
            starts["failures"] -= 1
            raise _down()

    monkeypatch.setattr(lifetime, "create_part_topics", create_topics)
    monkeypatch.setattr(lifetime, "partition_counts", lambda *args: {"in": 4})
    monkeypatch.setattr(lifetime, "join", FakeMembership.join)
    monkeypatch.setattr(lifetime.time, "sleep", lambda s: None)
    FakeMembership.joins, FakeMembership.fail_joins, FakeMembership.fail_runs = 0, 2, 1
    FakeMembership.describe_bounds = []
    stop = threading.Event()
    waits = []
    monkeypatch.setattr(stop, "wait", lambda s: waits.append(s))

    Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path).run(stop)

    assert starts["calls"] == 3  # two transport failures, then started
    assert FakeMembership.joins == 2  # a membership ended by the outage, then the next one
    assert len(waits) == 4  # waited after each failed start and each failed join
    # a join's describe requests wait 5 s, twice as long after each failed join in a row (a
    # loaded broker may be slower every time), and 5 s again for the next membership
    assert FakeMembership.describe_bounds == [5, 10, 20, 5]
    assert describe_timeout(3) == describe_timeout(9) == 30


def test_other_errors_still_end_the_process(tmp_path, monkeypatch):
    def create_topics(*args, **kwargs):
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    monkeypatch.setattr(lifetime, "create_part_topics", create_topics)
    with pytest.raises(KafkaException):
        Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path).run(threading.Event())


def test_a_failed_attempt_leaves_no_client_behind(tmp_path):
    """The clients a failed join made (a transactional producer still initializing) are gone
    before the next attempt, or they would fence it."""
    import weakref

    class Client:
        pass

    made = []

    def attempt():
        client = Client()
        made.append(weakref.ref(client))
        if len(made) == 1:
            client.cycle = client  # as a traceback's frames keep a failed __init__'s self
            raise _down()
        assert made[0]() is None, "the first attempt's client is still alive"
        return client

    stop = threading.Event()
    stop.wait = lambda s: None
    runner = Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path)
    assert isinstance(runner._retrying(stop, "joining", attempt), Client)


def test_a_fatal_client_error_while_joining_is_tried_again(tmp_path):
    attempts = []

    def attempt():
        attempts.append(1)
        if len(attempts) == 1:
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
        return "member"

    stop = threading.Event()
    stop.wait = lambda s: None
    runner = Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path)
    assert runner._retrying(stop, "joining", attempt) == "member" and len(attempts) == 2
