"""Every benchmark's reduced run (its `QUICK_ARGS`) on the session's broker: it exits 0 and
writes the rows it should. No figure is asserted against a bound: the machine is shared and
noisy, and `make bench` is where the figures are read."""

from __future__ import annotations

import collections
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from tests.support import REPO


def load(name: str) -> ModuleType:
    """bench/<name>.py, imported by path (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def quick_run(name: str, kafka: str, tmp_path: Path) -> tuple[ModuleType, dict]:
    module = load(name)
    out = tmp_path / f"{name}.json"
    assert module.main([*module.QUICK_ARGS, "--bootstrap", kafka, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == name and report["bootstrap"] == kafka
    return module, report


def test_throughput(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("throughput", kafka, tmp_path)
    rows = report["rows"]
    peers = list(module.PEERS) if module.peers.wanted() else []  # LOGWHEEL_BENCH_PEERS=1
    assert [r["contender"] for r in rows] == list(module.CONTENDERS) + peers
    for row in rows:
        assert row["records"] == module.QUICK["records"]
        assert row["seconds"] > 0 and row["records_per_s"] > 0 and len(row["runs"]) == 1
        # every contender's outputs were checked word by word; none here may lose or repeat
        assert (row["lost"], row["duplicated"]) == (0, 0), row["contender"]
    assert rows[0]["ratio"] == 1.0
    eos = next(r for r in rows if r["contender"] == "logwheel exactly_once")
    assert eos["vs_logwheel_eos"] == 1.0


def test_throughput_verify_counts_lost_and_duplicated() -> None:
    """The output check finds a lost and a repeated output of a word (it can fail)."""
    module = load("throughput")
    outputs = module.Outputs.__new__(module.Outputs)
    outputs.per_key = collections.Counter({b"a": 2, b"b": 1})
    outputs.per_key.update(f"warmup-{p}".encode() for p in range(module.PARTITIONS))
    outputs._read = lambda timeout: 0
    module.DRAIN_S = 0.0
    assert outputs.verify(["a", "b", "b"]) == {"lost": 1, "duplicated": 1}


def test_throughput_framework_share_compares_logwheel_with_the_hand_written_loop() -> None:
    module = load("throughput")
    cpu = {"bare loop": 1.5, "hand-written exactly_once": 4.5, "logwheel exactly_once": 6.75}
    rows = [{"contender": c, "cpu_us_per_record": v} for c, v in cpu.items()]
    line = module.framework_share(rows)
    assert "6.8 us/record, the hand-written loop 4.5 (1.50x)" in line
    assert "(the hand-written loop 3.00x it, logwheel 4.50x)" in line
    assert "not measured" in module.framework_share(rows[:2])


def test_latency(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("latency", kafka, tmp_path)
    rows = [r for r in report["rows"] if r["system"] == "logwheel"]  # peers: their own hops
    assert [r["guarantee"] for r in rows] == list(module.GUARANTEES)
    for row in rows:
        assert set(row["hops"]) == set(module.HOPS)
        for hop in module.HOPS:
            stats = row["hops"][hop]
            assert stats["records"] > 0, (row["guarantee"], hop)
            assert stats["missing"] == 0, (row["guarantee"], hop, stats)
            assert 0 < stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"]


def test_watermark_lag(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("watermark_lag", kafka, tmp_path)
    names = [s["name"] for s in report["series"]]
    assert names == ["injector"] + [n for s in module.STAGES for n in (f"{s} by-key", s)]
    for series in report["series"]:
        assert series["samples"] > 0, series
        assert series["mean"] > 0, series  # a watermark behind wall time, as it must be
    assert [d["stage"] for d in report["window_delays"]] == list(module.STAGES)
    assert all(d["windows"] > 0 for d in report["window_delays"])


def test_table_catch_up(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("table_catch_up", kafka, tmp_path)
    kinds = [row[0] for row in report["rows"]]
    assert kinds == ["memory", "rocksdb", "rocksdb reopened"]
    assert report["rows"][2][1] == 1  # reopened: only the one record written since


def test_failover(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("failover", kafka, tmp_path)
    (with_standby, without) = report["rows"]
    assert with_standby[0] == "standby 3" and without[0] == "standby 0"
    assert with_standby[3] < without[3]  # the standby's takeover restored only the tail


def test_scaling(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("scaling", kafka, tmp_path)
    sizes = [(r["contender"], r["records"]) for r in report["sizes"]]
    records = module.QUICK["records"]
    assert sizes == [(module.LOGWHEEL[0], int(records * f)) for f in module.FRACTIONS]
    assert all(r["vs_smallest"] > 0 for r in report["sizes"])
    wide = report["cardinality"]
    assert wide[0]["contender"] == module.LOGWHEEL[0]
    for row in report["sizes"] + wide:
        assert (row["lost"], row["duplicated"]) == (0, 0), row["contender"]
    assert all(r["distinct"] == records for r in wide)  # every record a key of its own


def test_restore(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("restore", kafka, tmp_path)
    logwheel = report["rows"][0]
    assert logwheel["contender"] == "logwheel at_least_once"
    # every probe met its key's state restored from the changelog (its count went on)
    assert logwheel["probes_restored"] == logwheel["probes"] > 0
    assert logwheel["cold_restart_s"] > 0 and logwheel["warm_restart_s"] > 0


def test_backfill(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("backfill", kafka, tmp_path)
    rows = report["rows"]
    assert [r["contender"] for r in rows] == ["backfill local[2]", "streaming"]
    for row in rows:
        assert row["outputs"] == row["records"] > 0, row  # one output per input, no more
        assert row["seconds"] > 0 and row["cpu_s"] > 0
    assert 0 < rows[0]["in_run_s"] < rows[0]["seconds"]


def test_idle(kafka: str, tmp_path: Path) -> None:
    _, report = quick_run("idle", kafka, tmp_path)
    assert set(report["records_per_s"]) == {
        "__transaction_state",
        "__consumer_offsets",
        "its own topics",
    }
    assert report["seconds"] >= 3 and len(report["processes"]) == 3  # supervisor + 2 stages
    assert all(p["threads"] >= 1 and p["cpu_pct"] >= 0 for p in report["processes"])


def test_windowed(kafka: str, tmp_path: Path) -> None:
    module, report = quick_run("windowed", kafka, tmp_path)
    rows = report["rows"]
    peers = list(module.PEERS) if module.peers.wanted() else []  # LOGWHEEL_BENCH_PEERS=1
    assert [r["contender"] for r in rows] == list(module.CONTENDERS) + peers
    assert report["windows"] > module.QUICK["keys"] and report["failed"] == []
    for row in rows:
        assert row["seconds"] > 0 and row["records_per_s"] > 0 and len(row["runs"]) == 1
        # every window's final count was checked against the brute-force reference
        assert (row["missing"], row["unexpected"], row["duplicated"]) == (0, 0, 0), row
        assert row["runs"][0]["results"] == report["windows"], row["contender"]


def test_windowed_reference_and_check() -> None:
    """The reference counts every window the closing records close and none of theirs; the
    check finds a missing window, a wrong count and a result written twice (it can fail)."""
    module = load("windowed")
    size = module.SIZE_MS
    data = module.make_input(records=6, keys=2, minutes=3, base=0)
    data_events = data.events[: -data.closing]
    assert [e.timestamp for e in data_events] == sorted(e.timestamp for e in data_events)
    assert {e.timestamp for e in data.events[-data.closing :]} == {8 * size}  # two windows on
    assert {e.key for e in data.events[-data.closing :]} >= {"k0", "k1"}
    assert all(start < 6 * size for _, start in data.expected)  # closing windows left out
    assert sum(data.expected.values()) == 6 + 2 * module.PARTITIONS  # data and warm-up
    expected = data.results()
    written = collections.Counter(expected)
    assert module.compare(expected, written) == {"missing": 0, "unexpected": 0, "duplicated": 0}
    key, start, count = first = min(expected)
    written[first] -= 1
    written[(key, start, count + 1)] += 1  # a wrong count
    written[max(expected)] += 1  # a duplicate
    written.pop(sorted(expected)[1])  # a window never written
    assert module.compare(expected, +written) == {"missing": 2, "unexpected": 1, "duplicated": 1}
