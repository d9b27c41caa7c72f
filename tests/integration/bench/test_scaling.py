"""bench/scaling.py's reduced run: every size's and the high cardinality's outputs checked."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_scaling(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("scaling", kafka, tmp_path)
    sizes = [(r["contender"], r["records"]) for r in report["sizes"]]
    records = module.QUICK["records"]
    assert sizes == [(module.LOGWHEEL[0], int(records * f)) for f in module.FRACTIONS]
    assert report["sizes"][0]["vs_smallest"] == 1.0  # the smallest over itself
    assert all(r["vs_smallest"] > 0 for r in report["sizes"])
    wide = report["cardinality"]
    assert wide[0]["contender"] == module.LOGWHEEL[0]
    for row in report["sizes"] + wide:
        assert checked(row) == CHECK, (row["contender"], row["records"])
    assert all(r["distinct"] == records for r in wide)  # every record a key of its own
