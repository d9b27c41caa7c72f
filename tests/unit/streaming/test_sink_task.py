"""A sink run by the one membership loop (framework/streaming/membership.py) with its task
manager, tasks and committer, on stand-in Kafka clients and a user-written sink that records
its calls and fails on command: `open` before any read, batches in offset order with the offset
after them, a restart resuming from the sink's offset (not the group's), refused rows
dead-lettered and the rest written again, a target that does not answer held and given the
same batch again, nothing skipped, a fenced write ending the membership."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

import framework.streaming.holds as holds_module
import framework.streaming.sink_task_manager as manager_module
from framework import Pipeline
from framework.core.api import Record
from framework.core.dead_letters import ErrorPolicy
from framework.errors import ConfigurationError, Rejoin
from framework.kafka.output import PartIO
from framework.sinks import Fenced, Refused, Unavailable
from framework.streaming.membership import Pace
from framework.streaming.wiring import sink_membership
from tests.unit.streaming.fakes import FakeAdmin, FakeCollector, FakeConsumer

TOPIC = "orders"


class RecordingSink:
    """A user's sink: its `table` and `offsets` stand for the target, written together by a
    `write`; `failures` are raised by the next writes (or opens), one each, in order."""

    def __init__(self, batch: int = 3) -> None:
        self.batch = batch
        self.table: list[str] = []  # record ids
        self.offsets: dict[tuple[str, int], int] = {}
        self.calls: list[tuple] = []
        self.failures: list[BaseException] = []
        self.open_failures: list[BaseException] = []
        self.closed = 0

    def open(self, topic: str, partition: int) -> int | None:
        self.calls.append(("open", topic, partition))
        if self.open_failures:
            raise self.open_failures.pop(0)
        return self.offsets.get((topic, partition))

    def write(
        self, topic: str, partition: int, records: Sequence[Record], next_offset: int
    ) -> None:
        self.calls.append(("write", partition, [r.id for r in records], next_offset))
        if self.failures:
            raise self.failures.pop(0)
        self.table += [r.id for r in records]
        self.offsets[(topic, partition)] = next_offset

    def close(self) -> None:
        self.closed += 1

    def writes(self) -> list[tuple]:
        return [c[1:] for c in self.calls if c[0] == "write"]


class GroupConsumer(FakeConsumer):
    def commit(self, offsets=None, asynchronous=True):
        self.calls.append(("commit", [(t.topic, t.partition, t.offset) for t in offsets]))


class Letters(FakeCollector):
    """The dead-letter producer: what it was given, headers kept; each flush, which
    acknowledges all of it, written down in `calls` (the sink's, to tell the order)."""

    def __init__(self, calls: list | None = None) -> None:
        super().__init__()
        self.sent: list[tuple] = []
        self.calls = [] if calls is None else calls

    def send_all(self, records):
        for topic, key, value, _partition, _timestamp, headers in records:
            self.sent.append((topic, key, value, dict(headers)))

    def flush(self):
        self.calls.append(("flush", len(self.sent)))


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(holds_module, "backoff", lambda retries: 0.0)
    monkeypatch.setattr(manager_module, "backoff", lambda retries: 0.0)


def _run(sink, consumer, done, letters=None) -> Letters:
    pipeline = Pipeline("shop", partitions=2).source(TOPIC)
    pipeline.sink("db", inputs={TOPIC: None}, sink=sink)
    spec = pipeline.part("db")
    letters = letters or Letters()
    io = PartIO(pipeline, spec, letters, {}, ErrorPolicy(spec.group, spec.on_error))
    membership = sink_membership(io, consumer, FakeAdmin(), "shop.db.a", Pace(idle_poll_s=0))
    stop = threading.Event()
    consumer.inside(lambda: consumer.rebalance([(TOPIC, 0)]))
    consumer.stop_when(done, stop)
    membership.run(stop)
    return letters


def test_batches_go_in_offset_order_with_the_next_offset_and_a_restart_resumes_from_the_sink():
    sink, consumer = RecordingSink(batch=3), GroupConsumer()
    consumer.add(TOPIC, 0, "abcdefg")
    _run(sink, consumer, lambda: len(sink.table) == 7)
    assert sink.calls[0] == ("open", TOPIC, 0)
    assert sink.writes() == [
        (0, ["orders/0/0", "orders/0/1", "orders/0/2"], 3),
        (0, ["orders/0/3", "orders/0/4", "orders/0/5"], 6),
        (0, ["orders/0/6"], 7),
    ]
    assert sink.closed == 1
    # the group says 2 (behind): the next membership starts where the sink says, at 7
    again = GroupConsumer(committed={(TOPIC, 0): 2})
    again.records = consumer.records
    again.add(TOPIC, 0, "hi")
    _run(sink, again, lambda: len(sink.table) == 9)
    assert ("seek", (TOPIC, 0, 7)) in again.calls
    assert sink.table == [f"orders/0/{i}" for i in range(9)]  # nothing twice, nothing lost
    assert ("commit", [(TOPIC, 0, 9)]) in again.calls  # for `logwheel status` alone


def test_records_handed_on_from_before_the_seek_to_the_targets_offset_are_passed_over():
    """The consumer starts a partition where the group stood and may still hand on what it
    fetched from there after the seek to where the target stands (librdkafka: a late answer
    of the group's offset): the target holds those records already."""
    sink, consumer = RecordingSink(batch=10), GroupConsumer()
    sink.offsets[(TOPIC, 0)] = 3
    consumer.add(TOPIC, 0, "abcdef")
    consumer.inside(
        lambda: consumer.positions.update({(TOPIC, 0): 0}),  # fetched anew from the start
        when=lambda: ("seek", (TOPIC, 0, 3)) in consumer.calls,
    )
    _run(sink, consumer, lambda: len(sink.table) == 3)
    assert sink.writes() == [(0, ["orders/0/3", "orders/0/4", "orders/0/5"], 6)]


def test_a_target_without_offsets_starts_where_the_group_stands():
    sink, consumer = RecordingSink(batch=10), GroupConsumer(committed={(TOPIC, 0): 2})
    consumer.add(TOPIC, 0, "abcd")
    _run(sink, consumer, lambda: len(sink.table) == 2)
    assert ("seek", (TOPIC, 0, 2)) in consumer.calls
    assert sink.writes() == [(0, ["orders/0/2", "orders/0/3"], 4)]


def test_a_refused_row_is_dead_lettered_with_the_targets_words_and_the_rest_written_again():
    sink, consumer = RecordingSink(batch=3), GroupConsumer()
    sink.failures = [Refused([(1, "CheckViolation: amount must be >= 0")])]
    consumer.add(TOPIC, 0, "abc")
    letters = _run(sink, consumer, lambda: len(sink.table) == 2, Letters(sink.calls))
    assert sink.writes() == [
        (0, ["orders/0/0", "orders/0/1", "orders/0/2"], 3),
        (0, ["orders/0/0", "orders/0/2"], 3),
    ]
    writes = [i for i, call in enumerate(sink.calls) if call[0] == "write"]
    assert ("flush", 1) in sink.calls[writes[0] : writes[1]]  # the refused row acknowledged
    ((topic, key, _, headers),) = letters.sent
    assert (topic, key) == ("shop.db.dlq", b"b")
    assert headers["logwheel.error.stage"] == b"write"
    assert b"CheckViolation: amount must be >= 0" in headers["logwheel.error"]
    assert headers["logwheel.source.offset"] == b"1"


def test_an_undecodable_record_is_dead_lettered_and_the_batch_written_past_it():
    sink, consumer = RecordingSink(batch=3), GroupConsumer()
    consumer.add(TOPIC, 0, "abc")
    consumer.records[(TOPIC, 0)][1] = consumer.records[(TOPIC, 0)][0].__class__(
        topic=TOPIC, partition=0, offset=1, key=b"b", value=b"{not json", timestamp=(1, 1)
    )
    letters = _run(sink, consumer, lambda: len(sink.table) == 2, Letters(sink.calls))
    assert sink.writes() == [(0, ["orders/0/0", "orders/0/2"], 3)]
    write = next(i for i, call in enumerate(sink.calls) if call[0] == "write")
    assert ("flush", 1) in sink.calls[:write]  # on the broker before the write leaves it out
    ((topic, key, value, headers),) = letters.sent
    assert (topic, key, value) == ("shop.db.dlq", b"b", b"{not json")
    assert headers["logwheel.error.stage"] == b"decode"


def test_a_target_that_does_not_answer_gets_the_same_batch_again_and_nothing_is_skipped():
    sink, consumer = RecordingSink(batch=3), GroupConsumer()
    sink.open_failures = [Unavailable("connection refused")]
    sink.failures = [Unavailable("connection refused"), RuntimeError("the user's bug")]
    consumer.add(TOPIC, 0, "abcde")
    _run(sink, consumer, lambda: len(sink.table) == 5)
    assert [c[0] for c in sink.calls[:2]] == ["open", "open"]  # opened again, then read
    first = (0, ["orders/0/0", "orders/0/1", "orders/0/2"], 3)
    assert sink.writes()[:3] == [first, first, first]
    assert sink.writes()[3:] == [(0, ["orders/0/3", "orders/0/4"], 5)]
    assert sink.table == [f"orders/0/{i}" for i in range(5)]
    assert any(e[1] == "pause" for e in consumer.events)


def test_a_fenced_write_ends_the_membership_and_writes_nothing():
    sink, consumer = RecordingSink(batch=2), GroupConsumer()
    sink.failures = [Fenced("opened by another instance")]
    consumer.add(TOPIC, 0, "ab")
    with pytest.raises(Rejoin, match="fenced"):
        _run(sink, consumer, lambda: False)
    assert sink.table == [] and sink.closed == 1


def test_a_sink_the_target_refuses_to_open_for_its_configuration_stops_at_once():
    sink, consumer = RecordingSink(), GroupConsumer()
    sink.open_failures = [ConfigurationError("no table paid_orders: create it")]
    consumer.add(TOPIC, 0, "a")
    with pytest.raises(ConfigurationError, match="create it"):
        _run(sink, consumer, lambda: False)
    assert sink.writes() == []
