"""bench/sink.py's reduced run: both contenders' tables checked row for row."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_sink(kafka: str, postgres, tmp_path: Path) -> None:
    _, report = quick_run("sink", kafka, tmp_path)
    rows = {r["contender"]: r for r in report["rows"]}
    assert set(rows) == {"logwheel exactly_once", "floor at_least_once"}
    for row in rows.values():
        assert checked(row) == CHECK
        assert row["rows_per_s"] > 0
    assert "cpu_vs_floor" in rows["logwheel exactly_once"]  # no figure is held to a bound
