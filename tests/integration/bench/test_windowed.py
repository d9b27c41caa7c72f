"""bench/windowed.py's reduced run: every window's final count checked against brute force."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_windowed(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("windowed", kafka, tmp_path)
    rows = report["rows"]
    peers = list(module.PEERS) if module.peers.wanted() else []  # LOGWHEEL_BENCH_PEERS=1
    assert [r["contender"] for r in rows] == list(module.CONTENDERS) + peers
    assert report["windows"] > module.QUICK["keys"]
    for row in rows:
        assert row["seconds"] > 0 and row["records_per_s"] > 0 and len(row["runs"]) == 1
        # every window's final count was checked against the brute-force reference
        assert checked(row) == CHECK, row
        assert row["runs"][0]["results"] == report["windows"], row["contender"]
