"""Finding the input record whose output the broker refuses: a refused commit first reads the
topics' limits again, a second in a row re-runs one record per commit until the one refused
is found; it is dead-lettered from then on and the rest flows (invariant 7). On a real broker:
tests/integration/test_bad_records.py."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

from framework import Pipeline
from framework.core.dead_letters import ErrorPolicy
from framework.kafka.limits import TopicLimits
from framework.kafka.output import PartIO
from framework.streaming import refused_records
from framework.streaming.holds import Holds
from framework.streaming.membership import Pace
from framework.streaming.refused_records import RefusedRecords
from tests.unit.streaming.fakes import FakeAdmin, FakeCollector, FakeConsumer
from tests.unit.streaming.test_membership import Parts

TOO_LARGE = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large")


def _reading_limits(monkeypatch) -> list[list[str]]:
    """Each reading of the limits again (the topics it read), answered with the same limits."""
    reads: list[list[str]] = []

    def read_limits(admin, limits, producer_max_bytes):
        reads.append(sorted(limits))
        return TopicLimits(dict(limits), producer_max_bytes)

    monkeypatch.setattr(refused_records, "read_limits", read_limits)
    return reads


def _search(monkeypatch) -> tuple[RefusedRecords, list]:
    reads = _reading_limits(monkeypatch)
    pipeline = Pipeline("r").source("in").computation("c", object, inputs={"in": None})
    spec = pipeline["c"]
    io = PartIO(pipeline, spec, FakeCollector(), {"in": 1}, ErrorPolicy(spec.group, spec.on_error))
    return RefusedRecords(io, FakeAdmin()), reads


def test_a_first_refusal_reads_the_limits_again_and_a_second_starts_the_search(monkeypatch):
    search, reads = _search(monkeypatch)
    search.committed(False, TOO_LARGE)
    assert len(reads) == 1 and not search.searching and not search.active
    search.committed(True, None)  # the limits read again caught it: no search
    search.committed(False, TOO_LARGE)
    assert len(reads) == 2 and not search.searching
    search.committed(False, TOO_LARGE)
    assert search.searching and search.active


def test_an_abort_that_is_no_refusal_of_content_starts_nothing(monkeypatch):
    search, reads = _search(monkeypatch)
    search.committed(False, None)  # e.g. the group's generation moved
    search.committed(False, None)
    assert reads == [] and not search.searching


class _Task:
    def __init__(self) -> None:
        self.ran: list[int] = []

    def handle_run(self, msgs, inp) -> None:
        self.ran += [m.offset() for m in msgs]
        inp.position = msgs[-1].offset() + 1


class _Inp:
    paused = False
    position = 0

    def consumed(self, msg) -> None:
        self.position = msg.offset() + 1


def test_the_record_of_a_refused_one_record_commit_is_dead_lettered_from_then_on(monkeypatch):
    search, _ = _search(monkeypatch)
    search.committed(False, TOO_LARGE)
    search.committed(False, TOO_LARGE)  # searching: one record per commit
    task, inp = _Task(), _Inp()
    routes, holds = {("in", 0): (task, inp)}, Holds(search.io.spec, FakeConsumer())
    msgs = [Message(topic="in", partition=0, offset=o, value=b"v") for o in range(3)]
    search.handle(msgs[1:2], routes, holds)
    search.committed(False, TOO_LARGE)
    reason = f"the broker refused its output: {TOO_LARGE.str()}"
    assert {p: str(e) for p, e in search.collector.poisoned.items()} == {("in", 0, 1): reason}
    search.handle(msgs, routes, holds)  # read again: the refused one is not run
    assert task.ran == [1, 0, 2] and inp.position == 3
    assert search.collector.log == ["send r.c.dlq"]
    search.committed(True, None)
    assert search.searching  # records were handled: the search goes on
    search.committed(True, None)
    # its dead letter committed: forgotten, the records are handled in runs again
    assert not search.searching and not search.active


def test_the_loop_finds_the_refused_record_dead_letters_it_and_the_rest_flows(
    tmp_path, monkeypatch
):
    """The broker refuses the transaction that holds the count of key "x": read again after
    new limits, refused again, then re-run one record per commit until x's commit alone is
    refused; x goes to the dead-letter topic, every other record counts once."""
    reads = _reading_limits(monkeypatch)
    parts = Parts(tmp_path, Pace(commit_interval_s=3600))
    consumer = parts.consumer
    consumer.add("in", 0, "abxc")
    consumer.inside(lambda: consumer.rebalance([("in", 0)]))
    parts.producer.refuse = lambda sent: (
        TOO_LARGE if any(t == "counts" and k == b"x" for t, _, k, _ in sent) else None
    )
    parts.run_until(parts.read_to_the_end)
    assert parts.counts() == {"a": [1], "b": [1], "c": [1]}
    assert parts.dead_letters() == [b"x"]
    assert len(reads) == 1


def test_a_record_found_bad_elsewhere_or_behind_the_committed_position_slows_nothing(
    monkeypatch,
):
    """Records are handled one at a time only while a record found bad (a refused production,
    a hook abandoned: framework/streaming/hung_calls.py) lies in a partition this membership
    reads, ahead of its committed position: one another process owns, or one committed past,
    leaves the runs as they are."""
    from framework.errors import TimedOut

    search, _ = _search(monkeypatch)
    poisoned = search.collector.poisoned
    poisoned[("in", 1, 4)] = TimedOut("abandoned")  # in-1 is another process's
    routes = {("in", 0): (_Task(), _Inp())}
    assert not search.isolating(routes)
    poisoned[("in", 0, 7)] = TimedOut("abandoned")
    assert search.isolating(routes)
    search.passed({("in", 0): 7})
    assert search.isolating(routes)  # not yet past it
    search.passed({("in", 0): 8, ("in", 1): 2})
    assert not search.isolating(routes) and list(poisoned) == [("in", 1, 4)]
