"""An idle job costs nothing: it commits only when what it would commit moved (a commit per
loop once added hundreds of transactions a second per idle process), writes nothing to the
broker while its input is silent, and each of its processes takes well under 1% of a core
(issue 25: its poll backs off to 0.25 s, its consumers wait 100 ms at the broker)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.kafka.topic_ends import end_offsets
from framework.kafka.topics import pipeline_topics
from tests.support import Wordcount, wait_for

pytestmark = pytest.mark.timeout(300)
IDLE_S = 60
MAX_CORE = 0.01  # the bar for the test; the benchmark reports the figure (< 0.5%)


def last_commits(kafka: str, group: str, topic: str, partitions: int) -> list[int]:
    """The commit time each partition's committed offset carries (committer metadata)."""
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = consumer.committed(tps, 30)
    finally:
        consumer.close()
    return [json.loads(tp.metadata)["committed_at"] if tp.metadata else 0 for tp in committed]


def processes(pid: int) -> list[int]:
    """`pid` and its descendants (`logwheel run` supervises one child per computation)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += processes(int(child))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU time from /proc")
def test_each_process_of_an_idle_job_takes_under_one_percent_of_a_core_and_writes_nothing(
    kafka, tmp_path
):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(200)
    job = wc.job().start()
    admin = AdminClient({"bootstrap.servers": kafka})
    partitions = [(t.name, p) for t in pipeline_topics(wc.pipeline) for p in range(t.partitions)]
    try:
        wc.read_counts()
        time.sleep(5)  # the drained input's last commits and marks
        pids = processes(job.proc.pid)
        assert len(pids) == 3, "a supervisor and one process per computation"
        written, began = end_offsets(admin, partitions, committed=False), time.monotonic()
        cpu = {pid: cpu_seconds(pid) for pid in pids}
        time.sleep(IDLE_S)
        seconds = time.monotonic() - began
        share = {pid: (cpu_seconds(pid) - cpu[pid]) / seconds for pid in pids}
        print("idle CPU per process:", {pid: f"{100 * s:.2f}%" for pid, s in share.items()})
        assert max(share.values()) < MAX_CORE, f"an idle process took {share} of a core"
        now = end_offsets(admin, partitions, committed=False)
        moved = {tp: (offset, now[tp]) for tp, offset in written.items() if now[tp] != offset}
        assert not moved, f"an idle job wrote to {moved}"
    finally:
        assert job.stop() == 0
