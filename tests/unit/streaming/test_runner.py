"""The runner outlives a broker that is down or restarting: starting and rejoining wait for it
instead of ending the process (found by the seeded chaos run: a process restarted during a
broker restart died in `create_topics` with a transport error)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

import framework.streaming.member as member_module
import framework.streaming.runner as runner_module
from framework import Computation, Pipeline
from framework.errors import Rejoin
from framework.streaming.holds import Holds
from framework.streaming.runner import Runner
from tests.support import raise_bare


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def _pipeline() -> Pipeline:
    return Pipeline("p").source("in").computation("c", Noop, inputs={"in": None})


def _down() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))


class FakeMember:
    """Stands in for a group membership: counts joins, ends the run on the last."""

    joins = 0
    fail_joins = 0
    fail_runs = 0
    describe_bounds: list[float] = []

    def __init__(self, *args, describe_s, **kwargs):
        FakeMember.describe_bounds.append(describe_s)
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

    monkeypatch.setattr(runner_module, "create_part_topics", create_topics)
    monkeypatch.setattr(runner_module, "partition_counts", lambda *args: {"in": 4})
    monkeypatch.setattr(runner_module, "Member", FakeMember)
    monkeypatch.setattr(Runner, "_loop", lambda self, member, stop: member.run(stop))
    monkeypatch.setattr(runner_module.time, "sleep", lambda s: None)
    FakeMember.joins, FakeMember.fail_joins, FakeMember.fail_runs = 0, 2, 1
    FakeMember.describe_bounds = []
    stop = threading.Event()
    waits = []
    monkeypatch.setattr(stop, "wait", lambda s: waits.append(s))

    Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path).run(stop)

    assert starts["calls"] == 3  # two transport failures, then started
    assert FakeMember.joins == 2  # a membership ended by the outage, then the next one
    assert len(waits) == 4  # waited after each failed start and each failed join
    # a join's describe requests wait 5 s, twice as long after each failed join in a row (a
    # loaded broker may be slower every time), and 5 s again for the next membership
    assert FakeMember.describe_bounds == [5, 10, 20, 5]
    assert runner_module.describe_timeout(3) == runner_module.describe_timeout(9) == 30


def test_other_errors_still_end_the_process(tmp_path, monkeypatch):
    def create_topics(*args, **kwargs):
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    monkeypatch.setattr(runner_module, "create_part_topics", create_topics)
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


class Recorder:
    def __init__(self, calls: list, name: str) -> None:
        self.calls, self.name = calls, name

    def __getattr__(self, method):
        return lambda *a, **k: self.calls.append(f"{self.name}.{method}")


def _member(calls: list):
    member = object.__new__(member_module.Member)
    member.spec = _pipeline()["c"]
    member.committer = Recorder(calls, "committer")
    member.consumer = Recorder(calls, "consumer")
    member.tasks = Recorder(calls, "tasks")
    member.channels = Recorder(calls, "channels")
    member.restorer = type("R", (), {"consumer": Recorder(calls, "restorer")})()
    member.collector = type("C", (), {"producer": Recorder(calls, "producer")})()
    member.failure = None
    return member


def test_an_unclean_close_leaves_the_producer_alone():
    """A membership ended by a fence or an outage aborts and never flushes its producer (a
    fenced producer's delivery reports failed inside confluent-kafka and ended the process);
    a clean close delivers what is in flight."""
    calls: list[str] = []
    _member(calls).close(clean=False)
    assert "committer.abandon" in calls and not any(c.startswith("producer.") for c in calls)
    calls.clear()
    _member(calls).close(clean=True)
    assert calls[-1] == "producer.flush"


class _Recorder:
    def __init__(self) -> None:
        self.runs: list[tuple[str, list[int]]] = []

    def handle_run(self, msgs, inp) -> None:
        self.runs.append((inp, [m.offset() for m in msgs]))


def _msg(topic: str, partition: int, offset: int, error: KafkaError | None = None) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, value=b"v", error=error)


class _Inp(str):
    paused = False


def test_records_go_to_their_task_a_run_of_one_partition_at_a_time():
    task = _Recorder()
    routes = {
        ("a", 0): (task, _Inp("a0")),
        ("a", 1): (task, _Inp("a1")),
        ("b", 0): (task, _Inp("b0")),
    }
    msgs = [
        *(_msg("a", 0, o) for o in (5, 6, 7)),
        _msg("a", 1, 3),
        _msg("b", 0, 9),  # another topic, same partition number: a run of its own
        _msg("c", 0, 1),  # no task owns it (revoked): dropped
        _msg("a", 0, 8),
        _msg("a", 0, -1, KafkaError(KafkaError._PARTITION_EOF)),  # not a record: ends the run
        _msg("a", 0, 9),
    ]
    runner_module._handle_runs(msgs, routes, Holds(_pipeline()["c"], None))
    assert task.runs == [("a0", [5, 6, 7]), ("a1", [3]), ("b0", [9]), ("a0", [8]), ("a0", [9])]


def test_a_close_survives_the_consumer_raising_a_bare_kafka_error():
    """confluent-kafka's `close` raised a bare KafkaError ("Can't subtract from empty
    assignment"), no Exception: the stores and the other clients must still be closed, and
    the runner go on to rejoin."""
    calls: list[str] = []
    member = _member(calls)

    def close() -> None:
        calls.append("consumer.close")
        raise_bare(KafkaError(KafkaError._INVALID_ARG, "Can't subtract from empty assignment"))

    member.consumer.close = close
    member.close(clean=False)
    assert calls[-4:] == ["tasks.close", "channels.close", "restorer.close", "committer.close"]


def test_an_idle_poll_waits_longer_each_quiet_round_up_to_its_bound_and_never_past_a_timer():
    runner = Runner(_pipeline(), "c", bootstrap="unused", state_dir=Path("unused"))
    waits = [runner._idle_timeout([], quiet) for quiet in range(12)]
    assert waits[0] == runner.idle_poll_s
    assert waits == sorted(waits) and waits[-1] == runner_module.IDLE_POLL_MAX_S

    class Timed:
        class executor:
            @staticmethod
            def next_processing_timer():
                return time.time() * 1000 + 30

    assert runner._idle_timeout([Timed()], 10) <= 0.031


def test_a_rebalance_callback_keeps_its_error_for_after_the_client_call():
    """An error never leaves a rebalance callback through the client (confluent-kafka held it,
    and with it the whole membership, alive): the loop raises it after `consume` returns."""
    member = _member([])

    def refuse(tps):
        raise Rejoin("the coordinator cannot say")

    member.tasks = type("T", (), {"assigned": staticmethod(refuse)})()
    member._on_assign(None, [TopicPartition("t", 0)])  # returns: the client sees no error
    with pytest.raises(Rejoin, match="cannot say"):
        member.raise_failure()
    member.raise_failure()  # raised once


@pytest.mark.parametrize("light", [True, False], ids=["poll", "consume"])
def test_the_loop_raises_what_a_rebalance_callback_kept_during_the_client_call(light):
    """Whichever client call ran the callback (an idle poll or a busy consume), its error
    ends the membership as if the callback had raised it: kept and never raised, a refused
    assignment would leave the member running without its partitions."""
    member = _member([])

    class Tasks:
        routes: dict = {}
        restoring = False

        def running(self):
            return []

        def assigned(self, tps):
            raise Rejoin("the coordinator cannot say")

    class Consumer:
        def poll(self, timeout):
            member._on_assign(self, [TopicPartition("t", 0)])

        def consume(self, n, timeout):
            self.poll(timeout)
            return []

    member.tasks, member.consumer = Tasks(), Consumer()
    member.isolation = type("I", (), {"isolating": False, "active": False})()
    member.meter, member.holds, member.lost = None, None, False
    member.dirty = not light  # a dirty member consumes, a clean one polls
    runner = Runner(_pipeline(), "c", bootstrap="unused", state_dir=Path("unused"))
    with pytest.raises(Rejoin, match="cannot say"):
        runner._loop(member, threading.Event())


def test_a_light_input_is_committed_as_soon_as_the_last_commit_is_done():
    """A record that arrives alone is committed in the round that read it, and the round after
    a commit asks the client for records at once (a poll, which returns at the first record):
    nothing waits between one transaction's end and the next one's first record."""
    calls: list = []
    member = type("M", (), {})()
    runner = Runner(_pipeline(), "c", bootstrap="unused", state_dir=Path("unused"))
    stop = threading.Event()

    class Consumer:
        def poll(self, timeout):
            calls.append("poll")
            return _msg("in", 0, len(calls))

        def consume(self, n, timeout):
            calls.append(("consume", timeout))
            return []

    def commit():
        calls.append("commit")
        member.dirty = False
        if calls.count("commit") == 3:
            stop.set()

    tasks = type("T", (), {"routes": {}, "restoring": False, "waiting": False})()
    tasks.running, tasks.step = lambda: [], lambda: None
    member.consumer, member.tasks, member.commit = Consumer(), tasks, commit
    member.lost, member.rewind, member.tables, member.dirty = False, False, None, False
    member.isolation = type("I", (), {"isolating": False, "active": False})()
    member.channels = type("Ch", (), {"poll": staticmethod(lambda: 0)})()
    member.holds = type("H", (), {"step": staticmethod(lambda routes: None)})()
    member.collector = type("Co", (), {"poll": staticmethod(lambda: None)})()
    member.meter = type("Me", (), {"reported": time.monotonic() + 60})()
    member.raise_failure = lambda: None
    member.committer = type("Cm", (), {"last_commit": time.monotonic()})()
    runner._loop(member, stop)
    assert calls == ["poll", ("consume", 0), "commit"] * 3
