"""bench/idle.py's reduced run: its job's counts checked, its processes' wake-ups measured."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_idle(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("idle", kafka, tmp_path)
    assert set(report["records_per_s"]) == {
        "__transaction_state",
        "__consumer_offsets",
        "its own topics",
    }
    assert checked(report) == CHECK  # the lines it drained were counted exactly
    # drained and silent, the job writes nothing to its topics (no live source moves a mark)
    assert report["records_per_s"]["its own topics"] == 0
    assert report["seconds"] >= 3 and len(report["processes"]) == 3  # supervisor + 2 stages
    supervisor, *stages = report["processes"]
    assert supervisor["threads"] >= 1
    for stage in stages:
        # an idle stage still fetches: its librdkafka threads woke within the window, so the
        # sampling saw its threads move (tests/unit/bench/test_idle.py: only within it)
        assert stage["threads"] > 1, stage
        assert any(kind.startswith("rdk:") for kind in stage["wakeups_per_s"]), stage
    assert report["cpu_pct_max"] == max(p["cpu_pct"] for p in report["processes"])
