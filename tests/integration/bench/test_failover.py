"""bench/failover.py's reduced run: a SIGKILLed owner's words counted exactly once."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_failover(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("failover", kafka, tmp_path)
    (with_standby, without) = report["rows"]
    assert with_standby["contender"] == "standby 3" and without["contender"] == "standby 0"
    # the standby's takeover restored only the tail
    assert with_standby["restored"] < without["restored"]
    for row in report["rows"]:
        # every word and probe counted once: the killed owner's open transaction aborted
        assert checked(row) == CHECK, row["contender"]
        assert row["failover_s"] > 0
