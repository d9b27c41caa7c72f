"""A sink's commit: each partition's gathered records written by the sink with the partition's
next offset — one transaction of the target each, which is what makes a sink exactly-once —
then the group's offsets, committed only so that `logwheel status` shows the sink's lag
(nothing resumes from them while the target has offsets). It has the committer's shape
(framework/streaming/committer.py), so the membership's loop runs a sink as it runs a
computation."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from framework.core.logs import RateLimited
from framework.core.metrics import COMMIT_SECONDS, COMMITS
from framework.kafka.groups import commit_metadata
from framework.streaming.input_partition import InputPartition
from framework.streaming.sink_task import SinkTask

log = logging.getLogger(__name__)


class SinkCommitter:
    """Commits a sink's tasks; nothing of it is a Kafka transaction."""

    refusal = None  # the broker never refuses a sink's commit for what a record holds

    def __init__(self, group: str, name: str, consumer: Consumer, instance: str) -> None:
        self.group = group
        self.name = name
        self.consumer = consumer
        self.instance = instance
        self.last_commit = time.monotonic()
        self._told: dict[tuple[str, int], int] = {}  # the group offsets committed so far
        self._warn = RateLimited(log)
        COMMITS.labels(name)

    def marks_moved(self, tasks: Iterable[SinkTask]) -> bool:
        """A sink publishes no watermark."""
        return False

    def commit(self, tasks: list[SinkTask], inputs: Iterable[InputPartition]) -> bool:
        """1. Each task writes what it gathered (a held one, after its backoff).
        2. The group's offset of each partition whose target moved, for `logwheel status`.
        Never aborts: a write either is the target's or left nothing (then it is held)."""
        started = time.monotonic()
        for task in tasks:  # 1
            task.prepare_commit()
        metadata = commit_metadata(self.instance)
        moved = [
            TopicPartition(inp.topic, inp.partition, task.written, metadata=metadata)
            for task in tasks
            for inp in task.inputs
            if self._told.get((inp.topic, inp.partition)) != task.written
        ]
        if moved:  # 2
            try:
                self.consumer.commit(offsets=moved, asynchronous=True)
                self._told.update({(tp.topic, tp.partition): tp.offset for tp in moved})
            except KafkaException as error:
                self._warn.log("commit", "%s: group offset not committed: %s", self.group, error)
        self.last_commit = time.monotonic()
        COMMITS.labels(self.name).inc()
        COMMIT_SECONDS.labels(self.name).observe(self.last_commit - started)
        return True

    def abandon(self) -> None:
        """Leaving without committing: what was gathered is read again by the next owner."""

    def close(self) -> None:
        """Nothing of its own to close."""
