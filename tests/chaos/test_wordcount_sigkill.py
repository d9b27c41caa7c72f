"""Exactly-once under crashes: SIGKILL `logwheel run` at random moments while lines flow.

Reduced size inside `make test`; `make chaos` (LOGWHEEL_CHAOS_FULL=1) runs the issue's size:
100,000 lines and at least five kills.
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
KILLS = 6 if FULL else 5

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1800 if FULL else 600)]


def run_with_kills(wc: Wordcount) -> int:
    """Feed LINES lines at RATE while killing the job KILLS times; returns the kills done."""
    rng = random.Random(7)
    fed = threading.Event()
    feeding = threading.Thread(target=_feed, args=(wc, fed), daemon=True)
    job = wc.job().start()
    feeding.start()
    kills = 0
    span = LINES / RATE
    try:
        while kills < KILLS:
            time.sleep(rng.uniform(0.3, 2 * span / KILLS))
            job.wait_working(2)
            # land while a fresh batch is in flight: between hooks, productions and the commit
            fed.clear()
            fed.wait(5)
            time.sleep(rng.uniform(0.0, 0.05))
            assert job.alive(), job.output()[-3000:]
            job.kill()
            kills += 1
            job = wc.job().start()
        feeding.join()
        wc.check_exact(wc.read_counts(timeout=900 if FULL else 300))
    finally:
        job.stop()
    return kills


def _feed(wc: Wordcount, fed: threading.Event) -> None:
    batch = RATE // 10
    while wc.sent < LINES:
        started = time.monotonic()
        wc.send_lines(min(batch, LINES - wc.sent))
        fed.set()
        time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))


def test_sigkill_loses_and_duplicates_nothing(kafka, tmp_path):
    assert run_with_kills(Wordcount(kafka, tmp_path)) == KILLS
