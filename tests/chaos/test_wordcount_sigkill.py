"""Exactly-once under crashes: SIGKILL `logwheel run` at random moments while lines flow (the
input keeps flowing until the last kill).

Reduced size inside `make test` (12,000 lines, three kills: the seeded chaos run there SIGKILLs
its processes four times more); `make chaos` (LOGWHEEL_CHAOS_FULL=1) runs the issue's size:
100,000 lines and six kills.
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from tests.support import Wordcount

FULL = os.environ.get("LOGWHEEL_CHAOS_FULL") == "1"
LINES = 100_000 if FULL else 12_000
RATE = 2_000 if FULL else 1_000  # lines per second, so kills land while work is in flight
KILLS = 6 if FULL else 3

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1800 if FULL else 600)]


def run_with_kills(wc: Wordcount) -> list[bool]:
    """Feed LINES lines at RATE, then a trickle until the job was killed KILLS times; returns,
    per kill, whether it landed right after a fresh batch."""
    rng = random.Random(7)
    fed, killed = threading.Event(), threading.Event()
    feeding = threading.Thread(target=_feed, args=(wc, fed, killed), daemon=True)
    job = wc.job().start()
    feeding.start()
    landed = []
    span = LINES / RATE
    try:
        while len(landed) < KILLS:
            time.sleep(rng.uniform(0.3, 2 * span / KILLS))
            job.wait_working(2)
            # land while a fresh batch is in flight: between hooks, productions and the commit
            fed.clear()
            landed.append(fed.wait(30))  # a batch every 0.1 s: 30 s means the feeder is stuck
            time.sleep(rng.uniform(0.0, 0.05))
            assert job.alive(), job.output()[-3000:]
            job.kill()
            job = wc.job().start()
        killed.set()
        feeding.join()
        wc.check_exact(wc.read_counts(timeout=900 if FULL else 300))
    finally:
        killed.set()
        job.stop()
    return landed


def _feed(wc: Wordcount, fed: threading.Event, killed: threading.Event) -> None:
    """LINES lines in batches every 0.1 s, then batches of ten (the kills take longer than
    the input lasts at RATE: restarts under load) until the last kill."""
    while wc.sent < LINES or not killed.is_set():
        started = time.monotonic()
        wc.send_lines(min(RATE // 10, LINES - wc.sent) if wc.sent < LINES else 10)
        fed.set()
        time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))


def test_sigkill_loses_and_duplicates_nothing(kafka, tmp_path):
    landed = run_with_kills(Wordcount(kafka, tmp_path))
    assert all(landed), f"kills that met no fresh batch: {landed}"
