from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.errors import Rejoin
from framework.kafka import topic_ends
from framework.kafka.errors import Unreachable
from framework.kafka.topic_ends import end_offsets


class Answers:
    """An admin client's list_offsets, answering from a script (one offset per call), and
    its list_topics (a metadata request), counted."""

    def __init__(self, *offsets: int) -> None:
        self.offsets = list(offsets)
        self.calls = 0
        self.refreshed = 0
        self.waits: list[float] = []

    def list_offsets(self, request, request_timeout, **_):
        self.calls += 1
        self.waits.append(request_timeout)
        offset = self.offsets.pop(0)
        answers = {}
        for tp in request:
            future: Future = Future()
            future.set_result(SimpleNamespace(offset=offset))
            answers[tp] = future
        return answers

    def list_topics(self, topic, timeout):
        self.refreshed += 1


class StaleEpoch(Answers):
    """An admin client whose cached leader epoch is older than the leader's, as one kept
    across a broker's restart: FENCED_LEADER_EPOCH until its metadata is fetched again
    (`fresh_after` requests; never if None)."""

    def __init__(self, end: int, fresh_after: int | None) -> None:
        super().__init__()
        self.end, self.fresh_after = end, fresh_after

    def list_offsets(self, request, **_):
        self.calls += 1
        fresh = self.fresh_after is not None and self.refreshed >= self.fresh_after
        answers = {}
        for tp in request:
            future: Future = Future()
            if fresh:
                future.set_result(SimpleNamespace(offset=self.end))
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.FENCED_LEADER_EPOCH)))
            answers[tp] = future
        return answers


def test_an_end_the_broker_cannot_say_yet_is_asked_again_never_returned():
    admin = Answers(-1001, -1001, 253)  # a broker restarting answers OFFSET_INVALID meanwhile
    assert end_offsets(admin, [("s", 0)], committed=False) == {("s", 0): 253}
    assert admin.calls == 3


def test_an_end_that_stays_unknown_is_a_cluster_out_of_reach():
    with pytest.raises(Unreachable, match="no end offset yet"):
        end_offsets(Answers(*[-1001] * 100), [("s", 0)], committed=False, timeout=0.3)


def test_a_stale_leader_epoch_is_set_right_by_fetching_the_topics_metadata():
    admin = StaleEpoch(end=41, fresh_after=1)
    assert end_offsets(admin, [("s", 0), ("s", 1)], committed=False) == {("s", 0): 41, ("s", 1): 41}
    assert (admin.calls, admin.refreshed) == (2, 1)


def test_a_client_that_stays_stale_is_given_up_for_new_clients_long_before_the_timeout(
    monkeypatch,
):
    monkeypatch.setattr(topic_ends, "STALE_EPOCH_S", 0.3)
    with pytest.raises(Rejoin, match="FENCED_LEADER_EPOCH"):
        end_offsets(StaleEpoch(end=41, fresh_after=None), [("s", 0)], committed=False)


class MovedLeader(Answers):
    """An admin client that knew a partition's leader before its broker was killed: no end
    (-1001, each question waiting out its timeout on the dead broker) until its metadata is
    fetched again after the leader moved (the `moved_after`th fetch)."""

    def __init__(self, end: int, moved_after: int) -> None:
        super().__init__()
        self.end, self.moved_after = end, moved_after

    def list_offsets(self, request, request_timeout, **_):
        moved = self.refreshed >= self.moved_after
        self.offsets = [self.end if moved else -1001]
        return super().list_offsets(request, request_timeout)


def test_a_leader_that_moved_unseen_is_found_by_short_questions_and_fresh_metadata(
    monkeypatch,
):
    """A killed leader's partition: a question that waited out the whole timeout, and no
    metadata fetched, had stalled a task taking partitions over for 30 s (issue 24)."""
    monkeypatch.setattr(topic_ends, "STALE_EPOCH_S", 0.0)  # no end is no stale client: no Rejoin
    admin = MovedLeader(end=12, moved_after=3)
    assert end_offsets(admin, [("s", 0)], committed=False, timeout=30) == {("s", 0): 12}
    assert (admin.calls, admin.refreshed) == (4, 3)
    assert admin.waits == [topic_ends.ATTEMPT_S] * 4
