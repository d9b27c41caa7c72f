"""bench/throughput.py's reduced run: every contender's outputs checked against the reference
before its figures, and the check failing the run when an output comes twice."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Producer

from tests.integration.bench.runs import CHECK, checked, load, quick_run
from tests.support import read_topic


def test_throughput(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("throughput", kafka, tmp_path)
    rows = report["rows"]
    peers = [p for p in module.PEERS if p not in module.SHORTER] if module.peers.wanted() else []
    shorter = [c for p in module.SHORTER for c in (module.BESIDE_SHORTER, p) if peers]
    assert [r["contender"] for r in rows] == list(module.CONTENDERS) + peers + shorter
    for row in rows:
        records = module.QUICK["records"] // module.SHORTER.get(row["contender"], 1)
        assert row["records"] == (records if row["input"] == "all" else rows[-1]["records"])
        assert row["seconds"] > 0 and row["records_per_s"] > 0 and len(row["runs"]) == 1
        # every contender's outputs were read to their end and checked word by word
        assert checked(row) == CHECK, row["contender"]
        assert row["cpu_us_per_record"] > 0, row["contender"]
    bare, eos = rows[0], next(r for r in rows if r["contender"] == "logwheel exactly_once")
    assert bare["contender"] == module.BARE
    # the ratios are of CPU per record, the bare loop's over exactly_once's (not wall time,
    # not 1 by construction); how they compare is printed, never asserted (a measured figure)
    assert eos["cpu_ratio"] == bare["cpu_us_per_record"] / eos["cpu_us_per_record"]
    assert bare["cpu_vs_logwheel_eos"] == bare["cpu_us_per_record"] / eos["cpu_us_per_record"]


def test_a_duplicate_written_after_the_run_fails_the_benchmark(
    kafka: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A copy of a contender's output written once its run's time was taken (a late duplicate)
    is read by the check, which fails the run: exit 1, a FAILED line, no aim line."""
    module = load("throughput")
    real_read = module.verify.read

    def read_after_a_duplicate(bootstrap: str, topics: list[str], result) -> dict:
        (topic,) = topics
        first = read_topic(bootstrap, topic, expect=1)[0]
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(topic, first.value(), first.key(), partition=first.partition())
        producer.flush(30)
        return real_read(bootstrap, topics, result)

    monkeypatch.setattr(module.verify, "read", read_after_a_duplicate)
    out = tmp_path / "throughput.json"
    argv = ["--records", "500", "--contender", "logwheel at_least_once", "--bootstrap", kafka]
    assert module.main([*argv, "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    for contender in ("bare loop", "logwheel at_least_once"):
        line = f"FAILED: {contender} (all input): WRONG: 0 missing, 0 unexpected, 1 duplicated"
        assert line in printed
    assert "aim:" not in printed and "records/s" not in printed.split("FAILED")[-1]
    assert len(json.loads(out.read_text())["failed"]) == 2
