"""Consumer groups (kafka/groups.py): refusing to move a group's offsets or write its state
while it has live members, asking again while its coordinator moves, and what a commit of
offsets carries. The admin client is a fake: what is tested is the decision on its answers
(tests/integration/test_reset.py asks a real broker)."""

from __future__ import annotations

import json
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework import Computation, Pipeline
from framework.core.pipeline import PipelineError
from framework.kafka import groups


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


SPEC = Pipeline("wc").computation("count", Noop, inputs={"lines": None})["count"]


class Admin:
    """describe_consumer_groups answering with `answers` in turn: a number of members, or a
    client error."""

    def __init__(self, *answers: int | KafkaError) -> None:
        self.answers, self.asked = list(answers), []

    def describe_consumer_groups(self, group_ids: list[str], request_timeout: float) -> dict:
        self.asked.append(group_ids)
        answer, future = self.answers.pop(0), Future()
        if isinstance(answer, KafkaError):
            future.set_exception(KafkaException(answer))
        else:
            future.set_result(SimpleNamespace(members=[object()] * answer))
        return {group_ids[0]: future}


def test_a_group_without_members_may_be_moved():
    admin = Admin(0)
    groups.refuse_live_members(admin, SPEC)
    assert admin.asked == [["wc.count"]]


def test_a_group_with_live_members_is_refused_naming_what_to_stop_and_what_then():
    with pytest.raises(PipelineError) as refused:
        groups.refuse_live_members(Admin(2), SPEC, then="backfill")
    assert str(refused.value) == (
        "wc.count has 2 live member(s): stop every `logwheel run` of it and wait out the "
        "session timeout (10 s), then backfill"
    )


def test_a_coordinator_moving_is_asked_again_not_taken_for_an_answer(monkeypatch):
    monkeypatch.setattr(groups.time, "sleep", lambda s: None)
    admin = Admin(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS), 1)
    with pytest.raises(PipelineError, match="1 live member"):
        groups.refuse_live_members(admin, SPEC)
    assert len(admin.asked) == 2


def test_an_error_that_does_not_pass_is_not_asked_again():
    admin = Admin(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED), 0)
    with pytest.raises(KafkaException):
        groups.refuse_live_members(admin, SPEC)
    assert len(admin.asked) == 1


def test_a_commit_says_when_and_by_whom(monkeypatch):
    monkeypatch.setattr(groups, "now_ms", lambda: 1234)
    assert json.loads(groups.commit_metadata("host/7")) == {
        "committed_at": 1234,
        "instance": "host/7",
    }
