"""bench/query.py's reduced run: every kind of query measured, every answer checked."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import quick_run


def test_query(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("query", kafka, tmp_path)
    rows = report["rows"]
    assert [(r["kind"], r["clients"]) for r in rows] == [
        *((kind, 1) for kind in module.KINDS),
        ("local key", module.CLIENTS),
    ]
    for row in rows:
        assert row["queries"] > 0, row
        assert 0 < row["p50"] <= row["p99"] <= row["max"]
