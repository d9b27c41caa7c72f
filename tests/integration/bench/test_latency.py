"""bench/latency.py's reduced run: every hop's records checked, none left out of a percentile."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_latency(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("latency", kafka, tmp_path)
    rows = [r for r in report["rows"] if r["system"] == "logwheel"]  # peers: their own hops
    assert [r["guarantee"] for r in rows] == list(module.GUARANTEES)
    for row in rows:
        # every record sent was read once on every hop, to their end, after the stop; every
        # measured one had been seen by the timing reader (no record dropped from a figure)
        assert checked(row) == CHECK, row["guarantee"]
        assert set(row["hops"]) == set(module.HOPS)
        for hop in module.HOPS:
            stats = row["hops"][hop]
            assert stats["records"] > 0, (row["guarantee"], hop)
            assert 0 < stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"]
        # each attempt measured as many records on every hop: none missing from one of them
        (attempt,) = row["attempts"]
        assert len({attempt[hop]["records"] for hop in module.HOPS}) == 1, attempt
