"""Clean shutdown: SIGTERM or SIGINT during heavy load ends `logwheel run` (a supervisor and its
children) with exit 0 within ten seconds, and a restart loses and repeats nothing."""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support import Wordcount, wait_for

pytestmark = pytest.mark.timeout(600)


def outputs(kafka: str, topic: str) -> int:
    """Records (and transaction markers) written to `topic` so far: a cheap progress probe."""
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": "probe"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(4)
        )
    finally:
        consumer.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_under_load_exits_zero_within_ten_seconds(kafka, tmp_path, sig):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(60_000)
    job = wc.job().start().wait_working(computations=2)
    wait_for(lambda: outputs(kafka, wc.counts_topic) > 0, 60, what="counting under way")
    sent = time.monotonic()
    job.signal(sig)
    code = job.proc.wait(30)
    took = time.monotonic() - sent
    assert code == 0, job.output()[-3000:]
    assert took < 10, f"exited after {took:.1f}s"
    assert outputs(kafka, wc.counts_topic) < wc.total(), "the load was over before the signal"
    job = wc.job().start()
    try:
        counts = wc.read_counts()
    finally:
        job.stop()
    wc.check_exact(counts)
