"""What a fetch returns, in runs: the consecutive messages of one partition, so that whoever
routes them (a computation's tasks, a sink's partitions) pays the routing once a run, not once
a record."""

from __future__ import annotations

from collections.abc import Iterator

from confluent_kafka import Message

from framework.kafka.errors import group_event


def partition_runs(msgs: list[Message]) -> Iterator[tuple[str, int, list[Message]]]:
    """(topic, partition, run) for each run of consecutive messages of one partition; a
    message carrying an error is handed to `group_event` (which raises `Rejoin` for a dead
    consumer) and is in no run."""
    start, n = 0, len(msgs)
    while start < n:
        first = msgs[start]
        err = first.error()
        if err is not None:
            group_event(err)
            start += 1
            continue
        topic, partition = first.topic(), first.partition()
        end = start + 1
        while end < n:
            msg = msgs[end]
            if msg.partition() != partition or msg.topic() != topic or msg.error() is not None:
                break
            end += 1
        yield topic, partition, msgs[start:end] if start or end < n else msgs
        start = end
