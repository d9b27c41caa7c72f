"""bench/table_catch_up.py's reduced run: each table's contents checked key by key."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_table_catch_up(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("table_catch_up", kafka, tmp_path)
    kinds = [row[0] for row in report["rows"]]
    assert kinds == ["memory", "rocksdb", "rocksdb reopened"]
    assert report["rows"][2][1] == 1  # reopened: only the one record written since
    assert [c["contender"] for c in report["checks"]] == kinds
    assert all(checked(c) == CHECK for c in report["checks"])
