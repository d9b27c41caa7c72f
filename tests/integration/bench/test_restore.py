"""bench/restore.py's reduced run: the restored state's counts checked."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_restore(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("restore", kafka, tmp_path)
    logwheel = report["rows"][0]
    assert logwheel["contender"] == "logwheel at_least_once"
    # every probe met its key's state restored from the changelog (its count went on to 3),
    # and every other output was written once with its count
    assert logwheel["probes_restored"] == logwheel["probes"] > 0
    assert checked(logwheel) == CHECK
    assert logwheel["cold_restart_s"] > 0 and logwheel["warm_restart_s"] > 0
