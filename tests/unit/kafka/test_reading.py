from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.errors import Rejoin
from framework.kafka import reading
from framework.kafka.errors import Unreachable
from framework.kafka.reading import end_offsets
from tests.unit.kafka.fakes import Answers, MovedLeader


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
    monkeypatch.setattr(reading, "STALE_EPOCH_S", 0.3)
    with pytest.raises(Rejoin, match="FENCED_LEADER_EPOCH"):
        end_offsets(StaleEpoch(end=41, fresh_after=None), [("s", 0)], committed=False)


def test_a_leader_that_moved_unseen_is_found_by_short_questions_and_fresh_metadata(
    monkeypatch,
):
    """A killed leader's partition: a question that waited out the whole timeout, and no
    metadata fetched, had stalled a task taking partitions over for 30 s (issue 24)."""
    monkeypatch.setattr(reading, "STALE_EPOCH_S", 0.0)  # no end is no stale client: no Rejoin
    admin = MovedLeader(end=12, moved_after=3)
    assert end_offsets(admin, [("s", 0)], committed=False, timeout=30) == {("s", 0): 12}
    assert (admin.calls, admin.refreshed) == (4, 3)
    assert admin.waits == [reading.ATTEMPT_S] * 4
