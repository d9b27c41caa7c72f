"""The membership's loop, run for real on stand-in clients (tests/unit/streaming/fakes.py):
real tasks with RocksDB stores, the real task manager, committer and holds, over a consumer
whose rebalance callbacks fire from inside `consume` and a producer whose transactions commit
or abort. The same against a real broker: tests/integration/test_membership.py,
test_wordcount.py, test_registry_outage.py."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Message
from prometheus_client import REGISTRY

from framework import Computation, Pipeline
from framework.core.dead_letters import ErrorPolicy
from framework.core.timers import decode_timer
from framework.errors import Rejoin, Retry
from framework.kafka.output import PartIO
from framework.kafka.schema_registry import RegistryUnavailable
from framework.state.store import TaskStore
from framework.streaming import membership as membership_module
from framework.streaming.committer import Committer
from framework.streaming.holds import Holds
from framework.streaming.membership import IDLE_POLL_MAX_S, Membership, Pace
from framework.streaming.meter import Meter
from framework.streaming.pacing import Pacer
from framework.streaming.refused_records import RefusedRecords
from framework.streaming.task_manager import TaskManager
from tests.support import in_fresh_process, raise_bare
from tests.unit.streaming.fakes import (
    FakeAdmin,
    FakeChannels,
    FakeCollector,
    FakeConsumer,
    FakeRestorer,
)

handled: list[str] = []  # the id of each record whose hook ran to its end, in order
away: dict[str, int] = {}  # record id -> hook calls left during which its service is away


class Count(Computation):
    """Counts each key's records and produces every count (as CountWords does)."""

    def process_record(self, ctx, record):
        if away.get(record.id, 0) > 0:
            away[record.id] -= 1
            raise RegistryUnavailable("http://registry.test", "the registry does not answer")
        count = ctx.state.get("count", 0) + 1
        ctx.state["count"] = count
        ctx.produce("counts", {"count": count}, key=ctx.key)
        handled.append(record.id)


class Parts:
    """A membership of computation `count` of partitions in-0 and in-1, made of stand-ins;
    `offsets`, the group's committed offsets, shared with an earlier membership if given."""

    def __init__(
        self,
        tmp_path,
        pace: Pace,
        offsets: dict | None = None,
        computation: type[Computation] = Count,
        **membership,
    ) -> None:
        handled.clear()
        away.clear()
        pipeline = Pipeline("loop", partitions=2).source("in")
        pipeline.computation(
            "count", computation, inputs={"in": None}, outputs={"counts": None}, hook_timeout_ms=300
        )
        spec = pipeline["count"]
        self.log: list = []  # the producer's calls, and the consumer's consume and poll
        self.offsets: dict[tuple[str, int], int] = {} if offsets is None else offsets
        self.consumer = FakeConsumer(self.offsets, self.log)
        self.collector = FakeCollector(self.log, self.offsets)
        self.producer = self.collector.producer
        self.channels, self.restorer = FakeChannels(), FakeRestorer(instant=True)
        partitions = {"in": 2, "counts": 2}
        policy = ErrorPolicy(spec.group, spec.on_error)
        io = PartIO(pipeline, spec, self.collector, partitions, policy)
        tasks = TaskManager(
            io,
            self.consumer,
            FakeAdmin(),
            self.channels,
            self.restorer,
            tmp_path,
            calls=membership.get("calls"),
            hung=membership.get("hung"),
        )
        self.tasks, self.spec = tasks, spec
        self.membership = Membership(
            io,
            consumer=self.consumer,
            committer=Committer(spec, self.collector, self.consumer, "loop.count.test"),
            tasks=tasks,
            channels=self.channels,
            restorer=self.restorer,
            tables=None,
            refused_records=RefusedRecords(io, FakeAdmin()),
            holds=Holds(spec, self.consumer, self.consumer.clock),
            meter=Meter(spec.name, self.consumer, self.collector),
            pace=pace,
            hung=membership.get("hung"),
        )

    def run_until(self, done, rounds: int = 300) -> None:
        stop = threading.Event()
        self.consumer.stop_when(done, stop, rounds)
        self.membership.run(stop)

    def read_to_the_end(self) -> bool:
        """Every record read and its offset committed."""
        return all(self.offsets.get(tp) == len(log) for tp, log in self.consumer.records.items())

    def dead_letters(self) -> list[bytes]:
        """The keys of the committed dead letters."""
        return [key for topic, _, key, _ in self.producer.committed if topic == self.spec.dlq]

    def counts(self) -> dict[str, list[int]]:
        """The counts each key's committed productions carry, in order."""
        counts: dict[str, list[int]] = {}
        for topic, _, key, value in self.producer.committed:
            if topic == "counts":
                counts.setdefault(key.decode(), []).append(json.loads(value)["count"])
        return counts


def _parts(tmp_path, max_batch: int = 1000) -> Parts:
    # a commit interval no test reaches: a commit follows a round that drained the input
    return Parts(tmp_path, Pace(commit_interval_s=3600, max_batch=max_batch))


def test_a_rebalance_in_the_middle_of_a_run_commits_the_revoked_work_first(tmp_path):
    """A full batch of in-0 is handled and not yet committed (a backlog) when a rebalance
    fires inside the next consume: the revocation commits it before its task closes, and the
    new assignment goes on from there — each record counted once."""
    parts = _parts(tmp_path, max_batch=3)
    consumer = parts.consumer
    consumer.add("in", 0, "aaaaa")
    consumer.add("in", 1, "bbb")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))
    committed_at_reassignment = []

    def rebalance() -> None:
        consumer.rebalance([("in", 0), ("in", 1)])
        committed_at_reassignment.append(dict(parts.offsets))

    # inside the call after the first batch was handed out: in-0 read to 3, nothing committed
    consumer.inside(rebalance, when=lambda: consumer.positions.get(("in", 0)) == 3)
    parts.run_until(parts.read_to_the_end)

    assert committed_at_reassignment == [{("in", 0): 3}]
    assert parts.counts() == {"a": [1, 2, 3, 4, 5], "b": [1, 2, 3]}
    assert sorted(handled) == [f"in/0/{o}" for o in range(5)] + [f"in/1/{o}" for o in range(3)]


def test_a_refused_commit_rewinds_every_task_to_its_committed_state(tmp_path):
    """The second commit is aborted (the group's generation moved under it): its records are
    read again from the committed offsets by tasks rebuilt from their stores, so the counts
    go on from what committed — not from what the aborted transaction held."""
    parts = _parts(tmp_path)
    consumer, producer = parts.consumer, parts.producer
    consumer.add("in", 0, "aaa")
    consumer.inside(lambda: consumer.rebalance([("in", 0), ("in", 1)]))

    first_tasks = []

    def more() -> None:
        first_tasks.extend(parts.tasks.running())
        consumer.add("in", 0, "aa")
        producer.fail_next = KafkaError(
            KafkaError.ILLEGAL_GENERATION, "the group rebalanced", txn_requires_abort=True
        )

    consumer.inside(more, when=lambda: parts.offsets.get(("in", 0)) == 3)
    parts.run_until(parts.read_to_the_end)

    assert "abort" in parts.log
    assert parts.counts() == {"a": [1, 2, 3, 4, 5]}
    assert handled == [f"in/0/{o}" for o in (0, 1, 2, 3, 4, 3, 4)]  # 3 and 4 read again
    assert first_tasks and not any(t in parts.tasks.running() for t in first_tasks)  # rebuilt


def test_a_hold_pauses_its_partition_resumes_it_after_the_backoff_and_skips_nothing(tmp_path):
    """A record whose service does not answer (twice) holds its partition: paused at that
    record, resumed after 0.5 s and then 1 s, read again until the service answers; the other
    partition flows meanwhile, and every record counts once, in order."""
    parts = _parts(tmp_path)
    consumer = parts.consumer
    consumer.add("in", 0, "aaaa")
    consumer.add("in", 1, "bb")
    away["in/0/1"] = 2
    consumer.inside(lambda: consumer.rebalance([("in", 0), ("in", 1)]))
    parts.run_until(parts.read_to_the_end)

    assert [h for h in handled if h.startswith("in/0/")] == [f"in/0/{o}" for o in range(4)]
    assert handled.index("in/1/0") < handled.index("in/0/1")  # in-1 flowed during the hold
    assert parts.counts() == {"a": [1, 2, 3, 4], "b": [1, 2]}
    held = [(at, what) for at, what, tp in consumer.events if tp == ("in", 0)]
    holds = [at for at, what in held[2:] if what == "pause"]  # after the assignment's pair
    resumes = [at for at, what in held[2:] if what == "resume"]
    assert len(holds) == len(resumes) == 2
    for held_at, resumed_at, backoff in zip(holds, resumes, (0.5, 1.0), strict=True):
        assert resumed_at - held_at >= backoff - 1e-9


def test_a_lost_partition_commits_nothing_of_its_pending_work(tmp_path):
    """The session timed out with a batch handled and not yet committed: the partitions are
    someone else's, so the membership ends at once, its transaction aborted, nothing of that
    work committed (not even in the round that met the loss)."""
    parts = _parts(tmp_path, max_batch=3)
    consumer = parts.consumer
    consumer.add("in", 0, "aaaaa")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))
    consumer.inside(consumer.lose, when=lambda: consumer.positions.get(("in", 0)) == 3)
    with pytest.raises(Rejoin, match="lost"):
        parts.run_until(lambda: False)
    assert parts.offsets == {} and parts.counts() == {}
    assert parts.log[-1] == "abort" and parts.producer.open == []


def test_a_clean_stop_commits_and_delivers_what_is_in_flight(tmp_path):
    parts = _parts(tmp_path, max_batch=3)
    consumer = parts.consumer
    consumer.add("in", 0, "aaaaa")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))
    # stopped with a full batch handled, not yet committed
    parts.run_until(lambda: consumer.positions.get(("in", 0)) == 3)
    assert parts.offsets == {("in", 0): 3} and parts.counts() == {"a": [1, 2, 3]}
    assert consumer.closed and parts.channels.closed and parts.restorer.consumer.closed
    assert parts.producer.flushes == 1


def test_an_unclean_end_aborts_and_leaves_the_producer_alone(tmp_path):
    """A membership ended by a fence or an outage, with a batch handled and not committed,
    aborts and never flushes its producer (a fenced producer's delivery reports failed inside
    confluent-kafka and ended the process); the revocation its close makes commits nothing."""
    parts = _parts(tmp_path, max_batch=3)
    consumer = parts.consumer
    consumer.add("in", 0, "aaaaa")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))

    def down() -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))

    consumer.inside(down, when=lambda: consumer.positions.get(("in", 0)) == 3)
    with pytest.raises(Retry, match="transport"):
        parts.run_until(lambda: False)
    assert parts.offsets == {} and parts.counts() == {} and "abort" in parts.log
    assert parts.producer.flushes == 0 and consumer.closed


def test_a_close_survives_the_consumer_raising_a_bare_kafka_error(tmp_path):
    """confluent-kafka's `close` raised a bare KafkaError ("Can't subtract from empty
    assignment"), no Exception: the stores and the other clients must still be closed."""
    in_fresh_process(_a_close_raising_a_bare_kafka_error_closes_the_rest, str(tmp_path))


def _a_close_raising_a_bare_kafka_error_closes_the_rest(directory: str) -> None:
    tmp_path = Path(directory)
    parts = _parts(tmp_path)
    consumer = parts.consumer
    consumer.add("in", 0, "a")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))

    def close() -> None:
        raise_bare(KafkaError(KafkaError._INVALID_ARG, "Can't subtract from empty assignment"))

    consumer.close = close
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logging.getLogger(membership_module.__name__).addHandler(handler)
    parts.run_until(parts.read_to_the_end)
    assert parts.channels.closed and parts.restorer.consumer.closed
    TaskStore(tmp_path / "task-0", decode_timer).close()  # closed: RocksDB's lock is free
    # the error itself reached the membership (close runs in a thread of its own, which
    # must hand over even an error that is no exception, not leave the close behind)
    assert any("Can't subtract from empty assignment" in line for line in said), said


@pytest.mark.parametrize("light", [True, False], ids=["poll", "consume"])
def test_an_error_of_a_rebalance_callback_ends_the_membership_after_the_client_call(
    tmp_path, light
):
    """An error never leaves a rebalance callback through the client (confluent-kafka held it,
    and with it the whole membership, alive; the stand-in makes it a SystemError): the loop
    raises it once the call returned, whichever call ran the callback (an idle poll or a busy
    consume). Kept and never raised, the member would run on without its partitions."""
    parts = _parts(tmp_path, max_batch=1000 if light else 3)
    consumer = parts.consumer
    consumer.add("in", 0, "aaaa")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))

    def cannot_say(tps, timeout):
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))

    def rebalance() -> None:
        consumer.committed = cannot_say
        consumer.rebalance([("in", 0), ("in", 1)])

    at = 4 if light else 3  # light: all read and committed, idle; busy: a batch pending
    consumer.inside(rebalance, when=lambda: consumer.positions.get(("in", 0)) == at)
    with pytest.raises(Rejoin, match="committed offsets"):
        parts.run_until(lambda: False)
    assert ("poll" if light else "consume") == [c for c in parts.log if type(c) is tuple][-1][0]


def test_a_light_input_is_committed_in_the_round_that_read_it(tmp_path):
    """A record that arrives alone is committed in the round that read it, and the round after
    a commit asks the client for records at once (a poll, which returns at the first record):
    nothing waits between one transaction's end and the next one's first record."""
    parts = _parts(tmp_path)
    consumer = parts.consumer
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))
    for n in range(1, 4):  # one record at a time, each once the one before is committed
        consumer.inside(
            lambda: consumer.add("in", 0, "a"),
            when=lambda n=n: parts.offsets.get(("in", 0), 0) == n - 1 and bool(parts.tasks.routes),
        )
    parts.run_until(lambda: parts.offsets.get(("in", 0)) == 3)

    calls = " ".join(
        c if c == "commit" else f"{c[0]}:{c[1]}"
        for c in parts.log
        if c == "commit" or type(c) is tuple
    )
    # idle polls until the first record; then each round polls (its wait back at the first
    # step), takes what else there is without waiting, and commits
    pattern = r"(poll:\S+ )+consume:0 commit( poll:0.02 consume:0 commit){2} poll:0.02"
    assert re.fullmatch(pattern, calls), calls


def test_an_idle_poll_waits_longer_each_quiet_round_up_to_its_bound_and_never_past_a_timer(
    tmp_path,
):
    parts = _parts(tmp_path)
    parts.run_until(lambda: parts.consumer.rounds > 12)
    waits = [c[1] for c in parts.log if type(c) is tuple and c[0] == "poll"]
    assert waits[0] == 0.02
    assert waits == sorted(waits) and waits[-1] == IDLE_POLL_MAX_S

    class Timed:
        class executor:
            @staticmethod
            def next_processing_timer():
                return time.time() * 1000 + 30

    assert parts.membership._idle_timeout([Timed()], 10) <= 0.031


def _msg(topic: str, partition: int, offset: int, error: KafkaError | None = None) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, value=b"v", error=error)


class _Recorder:
    def __init__(self) -> None:
        self.runs: list[tuple[str, list[int]]] = []

    def handle_run(self, msgs, inp) -> None:
        self.runs.append((inp, [m.offset() for m in msgs]))


class _Inp(str):
    paused = False
    position = 0


def test_records_go_to_their_task_a_run_of_one_partition_at_a_time(tmp_path):
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
    spec = Pipeline("p").source("in").computation("c", Count, inputs={"in": None})["c"]
    Pacer(FakeConsumer(), Holds(spec, FakeConsumer())).route(msgs, routes)
    assert task.runs == [("a0", [5, 6, 7]), ("a1", [3]), ("b0", [9]), ("a0", [8]), ("a0", [9])]


def test_a_consumer_close_blocked_for_good_is_left_behind_and_the_rest_still_closed(
    tmp_path, monkeypatch, caplog
):
    """librdkafka's `close` waits for the group's coordinator (librdkafka#3954): past
    CLOSE_S it is left behind, logged by name and counted, and the membership still closes
    its stores (the next one opens them), its readers and its transactions' thread. A
    rebalance callback its thread makes later does nothing."""
    monkeypatch.setattr(membership_module, "CLOSE_S", 0.2)
    parts = _parts(tmp_path)
    consumer = parts.consumer
    consumer.add("in", 0, "a")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))
    release, closing = threading.Event(), []

    def close() -> None:
        release.wait()
        closing.append("returned")
        consumer._callback("on_revoke", [("in", 0)])  # what librdkafka's close then runs

    consumer.close = close
    stuck = "logwheel_stuck_calls_total"
    labels = {"computation": "count", "call": "close"}
    before = REGISTRY.get_sample_value(stuck, labels) or 0
    with caplog.at_level("ERROR"):
        parts.run_until(parts.read_to_the_end)
    assert "the group consumer: close has not returned after 0.2 s: left behind" in caplog.text
    assert REGISTRY.get_sample_value(stuck, labels) == before + 1
    assert parts.channels.closed and parts.restorer.consumer.closed
    TaskStore(tmp_path / "task-0", decode_timer).close()  # closed: RocksDB's lock is free
    revoked = {"computation": "count", "kind": "revoked"}
    commits, revocations = (
        parts.log.count("commit"),
        REGISTRY.get_sample_value("logwheel_rebalances_total", revoked),
    )
    release.set()
    deadline = time.monotonic() + 5
    while not closing and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closing  # the late revocation did nothing:
    assert parts.log.count("commit") == commits
    assert REGISTRY.get_sample_value("logwheel_rebalances_total", revoked) == revocations
