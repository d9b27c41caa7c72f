"""bench/join.py's reduced run: every pair and every unmatched record of the inner, left and
outer joins checked against the reference worked out from the input."""

from __future__ import annotations

from pathlib import Path

from tests.integration.bench.runs import CHECK, checked, quick_run


def test_join(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("join", kafka, tmp_path)
    rows = report["rows"]
    peers = list(module.PEERS) if module.peers.wanted() else []  # LOGWHEEL_BENCH_PEERS=1
    assert [r["contender"] for r in rows] == list(module.CONTENDERS) + peers
    data = module.make_input(**{k: module.QUICK[k] for k in ("records", "keys", "minutes")})
    for row in rows:
        assert row["seconds"] > 0 and row["records_per_s"] > 0 and len(row["runs"]) == 1
        # every result was checked against the reference: nothing missing, extra, twice or late
        assert checked(row) == CHECK, row
        how = row["contender"].split()[-1]
        assert row["results"] == sum(data.expected(how).values()), row["contender"]
        assert row["changelog_bytes_per_record"] > 0, row["contender"]
