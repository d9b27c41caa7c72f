"""What the Kafka clients' errors mean to logwheel: a passing failure to reach the cluster is
an `Unreachable` (a `Retry`), decided here once, where a client call or a message reports it;
everything else stays the client's own error."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import KafkaError, KafkaException

from framework.errors import LogwheelError, Rejoin, Retry

log = logging.getLogger(__name__)

_PASSING = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE,  # a request that waited out its timeout for a broker cut off
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._DESTROY_BROKER,  # a broker's connection torn down while it restarts
    KafkaError._UNKNOWN_PARTITION,  # metadata not yet refreshed after a broker restart
    KafkaError._NOENT,  # an admin request's "No leaders found" while a broker restarts
    KafkaError.FENCED_LEADER_EPOCH,  # the client's metadata older than a restarted leader's
    KafkaError.UNKNOWN_LEADER_EPOCH,  # ... or newer than the leader knows yet
    KafkaError.OFFSET_NOT_AVAILABLE,  # a new leader that cannot say its end offsets yet
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.BROKER_NOT_AVAILABLE,
}


class Unreachable(Retry):
    """The cluster could not be reached, or was between leaders or coordinators."""


def passing(error: KafkaError) -> bool:
    """Whether a client's error is one that passes (a broker down or restarting, a leader or
    coordinator moving), where a configuration error or a fenced producer would not."""
    return not error.fatal() and error.code() in _PASSING


def dead(error: KafkaError) -> bool:
    """Whether the client that reported `error` can do nothing more (a fenced producer, a
    static member fenced by another with its instance id): only new clients can go on.
    librdkafka reports a fatal error as an event of code _FATAL whose own fatal() is False."""
    return error.fatal() or error.code() == KafkaError._FATAL


@contextmanager
def reaching_kafka() -> Iterator[None]:
    """Client calls inside raise `Unreachable` for a passing failure (and for a client's
    `TimeoutError`), `Rejoin` for a client's fatal error (raised bare, not as a
    `KafkaException`, by some calls); any other error, logwheel's own among them, passes
    through unchanged."""
    try:
        yield
    except LogwheelError:  # already of its family (a `LeftBehind` call is a TimeoutError too)
        raise
    except TimeoutError as error:
        raise Unreachable(f"{type(error).__name__}: {error}") from None
    except KafkaException as error:
        if error.args and isinstance(error.args[0], KafkaError):
            if passing(error.args[0]):
                raise Unreachable(f"KafkaException: {error}") from None
            if dead(error.args[0]):
                raise Rejoin(f"fatal client error: {error}") from None
        raise
    except KafkaError as error:  # confluent-kafka raises some fatal errors bare
        raise Rejoin(f"fatal client error: {error}") from None


def check(error: KafkaError) -> None:
    """A message's error: nothing for a passing one (the client retries by itself), raised
    as the client's `KafkaException` otherwise."""
    if not passing(error):
        raise KafkaException(error)


def group_event(error: KafkaError) -> None:
    """An error a group member's consumer hands over among its messages: `Rejoin` when the
    consumer is dead, a warning otherwise (the end of a partition is no error at all)."""
    if dead(error):
        raise Rejoin(f"fatal consumer error: {error}")
    if error.code() != KafkaError._PARTITION_EOF:
        log.warning("consumer: %s", error)
