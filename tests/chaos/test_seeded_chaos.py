"""The seeded chaos run (issue 11): wordcount and the three-stage windowed pipeline, two
instances of every computation, on a broker of their own, under SIGKILL (some during restore),
SIGSTOP past the session timeout, broker stop/start and SIGKILL, wiped state directories and
malformed input; the independent verifier then finds nothing lost, duplicated or wrong.

`make test` runs the reduced size (>= 17,000 records, 4 faults of every process kind and 2 of
each broker kind, a fixed seed); `make chaos` (LOGWHEEL_CHAOS_FULL=1) runs >= 1,000,000
records, 10 faults of every kind. LOGWHEEL_CHAOS_SEED replays another seed; the summary line
names the seed of every run.

Its broker runs the KRaft controller in a JVM of its own, which the broker faults leave
running (`tests/chaos/seeded/faults.py`): with one combined JVM a restarted node acted on stale
leadership and its partitions then had no leader for a moment, where Kafka skips transaction
markers (stalls, duplicates, losses; README, the seeded chaos run).
"""

from __future__ import annotations

import pytest

from tests.chaos.seeded.run import FULL, FULL_RUN, REDUCED, SEED, assert_passed, run_chaos

SIZE = FULL if FULL_RUN else REDUCED
RECORDS = 1_000_000 if FULL_RUN else 17_000

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(7200 if FULL_RUN else 1500)]


def test_seeded_faults_lose_and_duplicate_nothing(tmp_path):
    assert_passed(run_chaos(tmp_path, SEED, SIZE), SIZE, RECORDS)
