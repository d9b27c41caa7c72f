"""bench/backfill.py's reduced run: the backfill's and streaming's outputs, read to their end."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_backfill(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("backfill", kafka, tmp_path)
    rows = report["rows"]
    assert [r["contender"] for r in rows] == ["backfill local[2]", "streaming"]
    for row in rows:
        # read to the end once the writer stopped: one output per input, no more, none late
        assert row["outputs"] == row["records"] > 0, row
        assert checked(row) == CHECK, row["contender"]
        assert row["seconds"] > 0 and row["cpu_s"] > 0
    assert 0 < rows[0]["in_run_s"] < rows[0]["seconds"]
