"""A passing failure to reach the cluster becomes `Unreachable` (a `Retry`) where a client
call reports it; every other error stays the client's own."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.errors import LogwheelError, Rejoin, Retry
from framework.kafka.errors import Unreachable, check, group_event, passing, reaching_kafka
from tests.support import in_fresh_process, raise_bare


def _raised(error: BaseException) -> BaseException:
    with pytest.raises(BaseException) as caught, reaching_kafka():
        raise error
    return caught.value


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT_QUEUE,  # a restorer's end offsets, its broker cut off (chaos)
        KafkaError.NOT_COORDINATOR,
        KafkaError._DESTROY_BROKER,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    ],
)
def test_a_passing_outage_is_unreachable_and_so_a_retry(code):
    error = _raised(KafkaException(KafkaError(code)))
    assert isinstance(error, Unreachable) and isinstance(error, Retry)
    assert isinstance(error, LogwheelError)
    assert passing(KafkaError(code))


def test_a_clients_timeout_is_unreachable():
    assert isinstance(_raised(TimeoutError("topics have no partition leaders")), Unreachable)


@pytest.mark.parametrize(
    "error",
    [
        KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)),
        ValueError("bad config"),
    ],
)
def test_any_other_error_passes_through_unchanged(error):
    assert _raised(error) is error


def test_a_messages_passing_error_is_left_to_the_client_and_any_other_raised():
    check(KafkaError(KafkaError._TRANSPORT))
    with pytest.raises(KafkaException):
        check(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))


def test_a_fatal_consumer_event_ends_the_membership():
    """A static member fenced by another with its instance id gets a _FATAL event (found by the
    seeded chaos run: the process idled forever instead of rejoining)."""
    with pytest.raises(Rejoin):
        group_event(KafkaError(KafkaError._FATAL, "fenced by another instance"))
    group_event(KafkaError(KafkaError._PARTITION_EOF))  # not an error: goes on


@pytest.mark.parametrize(
    "error",
    [
        KafkaError(KafkaError._TRANSPORT, fatal=True),
        KafkaError(KafkaError._FATAL, "Static consumer fenced by other consumer"),
        KafkaError(KafkaError._FENCED, fatal=True),
    ],
)
def test_a_fatal_client_error_ends_the_membership(error):
    """A client with a fatal error can do nothing more: the runner must rejoin with new clients
    (or the loop dies with it, its consumer never polled again: MAXPOLL, and no rejoin)."""
    assert isinstance(_raised(KafkaException(error)), Rejoin)


def test_a_bare_kafka_error_ends_the_membership():
    """confluent-kafka raises some errors as a bare KafkaError, which no `except Exception`
    catches: it used to pass the runner's handlers and end its loop for good."""
    in_fresh_process(_a_bare_fenced_error_is_a_rejoin)


def _a_bare_fenced_error_is_a_rejoin() -> None:
    with pytest.raises(Rejoin), reaching_kafka():
        raise_bare(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
