"""Clean shutdown: SIGTERM or SIGINT during heavy load ends `logwheel run` (a supervisor and its
children) with exit 0, and a restart loses and repeats nothing. The time it took is printed at
the end of the session beside its aim of ten seconds (the `aim` fixture); the test holds it
only to a liveness bound."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support import Wordcount, wait_for

pytestmark = pytest.mark.timeout(600)

SHUTDOWN_AIM_S = 10.0
SHUTDOWN_BOUND_S = 90.0
"""A liveness bound: a clean stop ends the batch in hand, commits it and closes the clients
(seconds; a commit step may retry for up to 60 s when a broker does not answer); 90 s leaves
room for a loaded machine, and a process that ignores the signal never ends."""


def outputs(kafka: str, topic: str) -> int:
    """Records (and transaction markers) written to `topic` so far: a cheap progress probe."""
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": "probe"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(4)
        )
    finally:
        consumer.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_under_load_ends_the_job_with_exit_zero_and_loses_nothing(
    kafka, tmp_path, sig, aim
):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(60_000)
    job = wc.job().start().wait_working(computations=2)
    wait_for(lambda: outputs(kafka, wc.counts_topic) > 0, 60, what="counting under way")
    sent = time.monotonic()
    job.signal(sig)
    try:
        code = job.proc.wait(SHUTDOWN_BOUND_S)
    except subprocess.TimeoutExpired:
        job.kill()
        pytest.fail(f"still running {SHUTDOWN_BOUND_S:.0f}s after {sig.name}")
    aim(f"clean shutdown on {sig.name} under load", time.monotonic() - sent, SHUTDOWN_AIM_S)
    assert code == 0, job.output()[-3000:]
    assert outputs(kafka, wc.counts_topic) < wc.total(), "the load was over before the signal"
    job = wc.job().start()
    try:
        counts = wc.read_counts()
    finally:
        job.stop()
    wc.check_exact(counts)
