"""An idle job costs the broker nothing: it commits only when what it would commit moved
(a commit per loop once added hundreds of transactions a second per idle process)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support import Wordcount, wait_for

pytestmark = pytest.mark.timeout(300)


def last_commits(kafka: str, group: str, topic: str, partitions: int) -> list[int]:
    """The commit time each partition's committed offset carries (committer metadata)."""
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = consumer.committed(tps, 30)
    finally:
        consumer.close()
    return [json.loads(tp.metadata)["committed_at"] if tp.metadata else 0 for tp in committed]


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_an_idle_job_does_not_commit(kafka, tmp_path, guarantee):
    wc = Wordcount(kafka, tmp_path, guarantee)
    wc.send_lines(200)
    job = wc.job().start()
    group, words = f"{wc.name}.count-words", f"{wc.prefix}words"
    try:
        wc.read_counts()
        wait_for(lambda: all(last_commits(kafka, group, words, 4)), 60, what="first commits")
        time.sleep(2)  # the last marks of the drained input
        before = last_commits(kafka, group, words, 4)
        time.sleep(5)
        after = last_commits(kafka, group, words, 4)
        assert after == before, "an idle job kept committing"
        wc.send_lines(10)  # and it still commits when there is work
        wait_for(lambda: last_commits(kafka, group, words, 4) != before, 60, what="a new commit")
    finally:
        assert job.stop() == 0
