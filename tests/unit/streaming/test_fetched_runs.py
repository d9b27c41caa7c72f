"""A fetch cut into runs: consecutive messages of one topic-partition, a message carrying an
error in none of them (a dead consumer's raising `Rejoin`, the end of a partition passing in
silence)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Message

from framework.errors import Rejoin
from framework.streaming.fetched_runs import partition_runs


def _msg(topic: str, partition: int, offset: int) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, value=b"")


def _error(code: int, topic: str = "a", partition: int = 0) -> Message:
    """An event among the messages, of the partition it tells of (as an end of partition is)."""
    return Message(topic=topic, partition=partition, error=KafkaError(code))


def _runs(msgs: list[Message]) -> list[tuple[str, int, list[int]]]:
    return [(t, p, [m.offset() for m in run]) for t, p, run in partition_runs(msgs)]


def test_a_run_ends_where_the_partition_or_the_topic_changes():
    msgs = [
        _msg("a", 0, 1),
        _msg("a", 0, 2),
        _msg("a", 1, 7),
        _msg("b", 1, 3),
        _msg("b", 1, 4),
        _msg("a", 0, 3),  # the first partition again: a run of its own, not merged
    ]
    assert _runs(msgs) == [
        ("a", 0, [1, 2]),
        ("a", 1, [7]),
        ("b", 1, [3, 4]),
        ("a", 0, [3]),
    ]


def test_a_fetch_of_one_run_is_handed_over_as_it_is():
    msgs = [_msg("a", 0, 1), _msg("a", 0, 2)]
    [(_, _, run)] = partition_runs(msgs)
    assert run is msgs


def test_nothing_fetched_is_no_run():
    assert _runs([]) == []


def test_the_end_of_a_partition_is_in_no_run_and_cuts_the_run_it_falls_in(caplog):
    msgs = [
        _msg("a", 0, 1),
        _error(KafkaError._PARTITION_EOF),
        _msg("a", 0, 2),
        _error(KafkaError._PARTITION_EOF),
    ]
    with caplog.at_level("WARNING"):
        assert _runs(msgs) == [("a", 0, [1]), ("a", 0, [2])]
    assert caplog.text == ""


def test_another_passing_error_is_logged_and_in_no_run(caplog):
    msgs = [_error(KafkaError._TRANSPORT), _msg("a", 0, 1)]
    with caplog.at_level("WARNING"):
        assert _runs(msgs) == [("a", 0, [1])]
    assert "consumer:" in caplog.text


def test_a_dead_consumers_error_raises_rejoin_after_the_runs_before_it():
    runs = partition_runs([_msg("a", 0, 1), _error(KafkaError._FATAL), _msg("a", 0, 2)])
    topic, partition, run = next(runs)
    assert (topic, partition, [m.offset() for m in run]) == ("a", 0, [1])
    with pytest.raises(Rejoin, match="fatal consumer error"):
        next(runs)
