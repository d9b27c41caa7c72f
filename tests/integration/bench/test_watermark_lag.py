"""bench/watermark_lag.py's reduced run: every series sampled, every window count checked."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_watermark_lag(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("watermark_lag", kafka, tmp_path)
    names = [s["name"] for s in report["series"]]
    assert names == ["injector"] + [n for s in module.STAGES for n in (f"{s} by-key", s)]
    for series in report["series"]:
        assert series["samples"] > 0, series
        assert series["mean"] > 0, series  # a watermark behind wall time, as it must be
    assert [d["stage"] for d in report["window_delays"]] == list(module.STAGES)
    assert all(d["windows"] > 0 for d in report["window_delays"])
    # the windows every stage's watermark had passed were written once, with their counts
    assert checked(report) == CHECK
    # every stage's watermark passed windows, so the check required some of each
    assert all(n > 0 for n in report["windows_required"].values()), report["windows_required"]
    assert sum(report["windows_required"].values()) <= report["windows_checked"]
