"""The runner of any part outlives a broker that is down or restarting: starting and rejoining
wait for it instead of ending the process (found by the seeded chaos run: a process restarted
during a broker restart died in `create_topics` with a transport error); a call blocked for good
ends a membership, and the runner joins again."""

from __future__ import annotations

import json
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import REGISTRY

import framework.streaming.runner as runner_module
import framework.streaming.wiring as wiring
from framework import Computation, Pipeline
from framework.core.pipeline import PipelineError
from framework.kafka.errors import Unreachable
from framework.streaming import committer as committer_mod
from framework.streaming.hung_calls import HungCalls
from framework.streaming.membership import Pace
from framework.streaming.runner import Runner
from framework.streaming.wiring import describe_timeout
from tests.support import in_fresh_process


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
    def join(cls, instance, describe_s, watch):
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

    monkeypatch.setattr(wiring, "create_part_topics", create_topics)
    monkeypatch.setattr(wiring, "partition_counts", lambda *args: {"in": 4})
    monkeypatch.setattr(wiring.KeyedWiring, "join", FakeMembership.join)
    monkeypatch.setattr(runner_module.time, "sleep", lambda s: None)
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

    monkeypatch.setattr(wiring, "create_part_topics", create_topics)
    with pytest.raises(KafkaException):
        Runner(_pipeline(), "c", bootstrap="127.0.0.1:1", state_dir=tmp_path).run(threading.Event())


def test_a_part_that_logwheel_run_does_not_run_is_refused_naming_those_it_does(tmp_path):
    pipeline = _pipeline()
    with pytest.raises(PipelineError, match="queries 'queries' .* is not run by `logwheel run`"):
        Runner(pipeline, "queries", bootstrap="127.0.0.1:1", state_dir=tmp_path)
    with pytest.raises(PipelineError, match="has no part 'nope'"):
        Runner(pipeline, "nope", bootstrap="127.0.0.1:1", state_dir=tmp_path)


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


def _runner_of_fakes(tmp_path, monkeypatch, stop, arrange, owns_process=False) -> list:
    """A Runner of test_membership's `Parts` computation whose joins make memberships of
    stand-in clients over one shared input ("in" 0: "aab", 1: "cc") and one group's committed
    offsets; `arrange(parts, n)` sets up the n-th membership. Returns the memberships made."""
    from tests.unit.streaming.test_membership import Parts

    offsets: dict = {}
    made: list = []

    def join(self, instance, describe_s, watch):
        parts = Parts(
            tmp_path / f"m{len(made)}",
            Pace(commit_interval_s=3600),
            offsets=offsets,
            calls=watch.calls,
            hung=watch.hung,
            computation=self.spec.factory,
        )
        consumer = parts.consumer
        consumer.add("in", 0, "aab")
        consumer.add("in", 1, "cc")
        consumer.inside(lambda: consumer.rebalance([("in", 0), ("in", 1)]))
        consumer.stop_when(parts.read_to_the_end, stop)
        arrange(parts, len(made))
        made.append(parts)
        return parts.membership

    monkeypatch.setattr(wiring, "create_part_topics", lambda *args, **kwargs: None)
    monkeypatch.setattr(wiring, "partition_counts", lambda *args: {"in": 2})
    monkeypatch.setattr(wiring.KeyedWiring, "join", join)
    monkeypatch.setattr(runner_module.time, "sleep", lambda s: None)
    return made


def test_a_client_call_blocked_for_good_ends_the_membership_and_the_runner_joins_again(
    tmp_path, monkeypatch, caplog
):
    """The stuck `send_offsets_to_transaction` of the cluster chaos runs (librdkafka#5456),
    blocking forever in a stand-in: past its timeout and a margin the call is left behind,
    a log line names it, a counter counts it, the membership ends uncommitted and the runner
    joins again; the next membership commits everything, once."""
    from tests.unit.streaming.test_membership import Count

    monkeypatch.setattr(committer_mod, "STEP_TIMEOUT_S", 0.1)
    monkeypatch.setattr(committer_mod, "LEFT_BEHIND_S", 0.3)
    release, stop = threading.Event(), threading.Event()

    def arrange(parts, n: int) -> None:
        if n == 0:

            def send_offsets_to_transaction(*args):
                release.wait()

            parts.producer.send_offsets_to_transaction = send_offsets_to_transaction

    made = _runner_of_fakes(tmp_path, monkeypatch, stop, arrange)
    labels = {"computation": "count", "call": "send_offsets_to_transaction"}
    before = REGISTRY.get_sample_value("logwheel_stuck_calls_total", labels) or 0
    pipeline = Pipeline("loop", partitions=2).source("in")
    pipeline.computation("count", Count, inputs={"in": None}, outputs={"counts": None})
    with caplog.at_level("WARNING"):
        Runner(pipeline, "count", bootstrap="127.0.0.1:1", state_dir=tmp_path).run(stop)
    release.set()
    assert "send_offsets_to_transaction has not returned after 0.4 s: left behind" in caplog.text
    assert "rejoining the group: send_offsets_to_transaction still blocked" in caplog.text
    assert REGISTRY.get_sample_value("logwheel_stuck_calls_total", labels) == before + 1
    assert len(made) == 2 and made[0].producer.committed == []
    assert made[1].counts() == {"a": [1, 2], "b": [1], "c": [1, 2]}


def test_a_hook_blocked_for_good_is_dead_lettered_at_timeout_and_the_rest_counted_once(tmp_path):
    """A record whose hook sleeps forever, and a timer whose hook does: each interrupted past
    hook_timeout_ms (300 ms) by the watchdog's signal, the membership ended, the runner joined
    again, and the next membership dead-letters it at stage "timeout" — everything else
    counted once. In a process of its own: the signal goes to the main thread."""
    in_fresh_process(_a_hook_blocked_for_good, str(tmp_path))


class Sleepy(Computation):
    """Counts as `Count` does; sleeps forever on record in/0/1 and in the timer key c's second
    record sets."""

    def process_record(self, ctx, record):
        if record.id == "in/0/1":
            threading.Event().wait()  # (time.sleep is the runner's stand-in here)
        count = ctx.state.get("count", 0) + 1
        ctx.state["count"] = count
        ctx.produce("counts", {"count": count}, key=ctx.key)
        if record.key == "c" and count == 2:
            ctx.set_timer("t", ctx.processing_time, "processing")

    def process_timer(self, ctx, timer):
        threading.Event().wait()


def _a_hook_blocked_for_good(directory: str) -> None:
    from pathlib import Path

    tmp_path = Path(directory)
    stop = threading.Event()
    monkeypatch = pytest.MonkeyPatch()
    made = _runner_of_fakes(tmp_path, monkeypatch, stop, lambda parts, n: None)
    pipeline = Pipeline("loop", partitions=2).source("in")
    pipeline.computation(
        "count", Sleepy, inputs={"in": None}, outputs={"counts": None}, hook_timeout_ms=300
    )
    Runner(pipeline, "count", bootstrap="-", state_dir=tmp_path, owns_process=True).run(stop)
    committed = [record for parts in made for record in parts.producer.committed]
    counts: dict[str, list[int]] = {}
    for topic, _, key, value in committed:
        if topic == "counts":
            counts.setdefault(key.decode(), []).append(json.loads(value)["count"])
    assert counts == {"a": [1], "b": [1], "c": [1, 2]}, counts  # in/0/1 never counted
    dead = [(key, value) for topic, _, key, value in committed if topic == "loop.count.dlq"]
    assert sorted(key for key, _ in dead) == [b"a", b"c"], dead  # the record, then the timer
    assert json.loads(dict(dead)[b"c"])["timer"] == "t"
    timeouts = {"computation": "loop.count", "stage": "timeout", "reason": "TimedOut"}
    # counted as met: in/0/1 also in the membership the timer's interruption ended
    assert REGISTRY.get_sample_value("logwheel_dead_letters_total", timeouts) == 3
    assert REGISTRY.get_sample_value("logwheel_hook_timeouts_total", {"computation": "count"}) == 2
    assert len(made) == 3  # each interruption ended a membership
    assert not HungCalls(tmp_path / "loop" / "count")  # both dead letters committed: forgotten
