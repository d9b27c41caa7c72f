"""The seeded chaos run's verifier can fail: under at_least_once, SIGKILLs alone make it find
duplicates (the other side of tests/chaos/test_seeded_chaos.py, in a file of its own so that
`make test` runs the two side by side)."""

from __future__ import annotations

import pytest

from tests.chaos.seeded.run import FULL_RUN, SEED, Size, run_chaos

# Under at_least_once, one SIGKILL alone must make the verifier fail. The whole input is
# written before the instances start, so they start with a backlog, which they work off in
# full batches and commit every 5 s (a drained input would commit at once). One instance per
# computation; the SIGKILL hits count-words (`targets`), which has the most to do: the words
# of 20,000 lines (about 60,000), seconds of CPU, where split-words drains its lines in about
# one. It lets count-words work for its hold (0.1 to 1 s of CPU) after it took its partitions
# and kills it then, mid-backlog, after it delivered outputs and before it committed their
# input offsets; the restarted instance counts them again on top of its restored state.
# The windowed pipeline runs too, small: ten windows, one rollup bucket (which its last
# window closes: fewer would leave the bucket open, its rollup missing).
AT_LEAST_ONCE = Size(
    lines=20_000, line_rate=50_000, windows=10, per_window=40, span=2, per_kind=1,
    kinds=("sigkill",), instances=1, targets=("count-words",), commit_interval_ms=5_000,
    backlog=True,
)  # fmt: skip

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(7200 if FULL_RUN else 600)]


def test_the_verifier_fails_under_at_least_once(tmp_path):
    outcome = run_chaos(tmp_path, SEED, AT_LEAST_ONCE, guarantee="at_least_once")
    print(outcome.line)
    assert not outcome.errors and not outcome.crashes, outcome.errors + outcome.crashes
    report = outcome.report
    assert not report.ok and report.duplicated > 0, outcome.line
