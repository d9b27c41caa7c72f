"""The closing summary of `make bench`: the results files of one run — the directory
bench/run_all.py made for it, bench/results/<run id>/, and nothing older — in its
summary.json, and Markdown tables of the figures issue 12 reads (throughput beside the peers,
flatness in input size, high cardinality, restore, latency, watermark lag), and the windowed
count and the interval join beside the peers. A benchmark whose check failed (bench/verify.py)
shows its failure lines instead of figures; one without a results file failed before writing it.

    python bench/summary.py [RUN_DIR | --quick]   # default: the latest (quick) run
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, verify  # noqa: E402


def markdown(head: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table; None shows as "-"."""
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in row) + " |")
    return "\n".join(lines)


def n(value: float | None, spec: str) -> str | None:
    return None if value is None else format(value, spec)


def throughput(report: dict) -> str:
    rows = report["rows"]
    head = ["contender", "records", "records/s", "CPU µs/record", "peak RSS MB"]
    head += ["records/s vs lw eos", "CPU vs lw eos", "missing / unexp. / dup / late"]
    return f"CountWords, median of {report['repeat']} interleaved rounds:\n\n" + markdown(
        head,
        (
            [r["contender"], f"{r['records']:,}", n(r["records_per_s"], ",.0f")]
            + [n(r["cpu_us_per_record"], ".1f"), n(r.get("peak_rss_mb"), ".0f")]
            + [n(r.get("vs_logwheel_eos"), ".2f"), n(r.get("cpu_vs_logwheel_eos"), ".2f")]
            + [checked(r)]
            for r in rows
        ),
    )


def checked(row: dict) -> str:
    """A row's check (bench/verify.py) as "missing / unexpected / duplicated / late"."""
    return " / ".join(str(row.get(k, "-")) for k in verify.COUNTS)


def scaling(report: dict) -> str:
    head = ["contender", "records", "distinct keys", "records/s", "CPU µs/record", "peak RSS MB"]
    sizes = markdown(
        [*head, "CPU vs smallest"],
        (
            [r["contender"], f"{r['records']:,}", f"{r['distinct']:,}"]
            + [n(r["records_per_s"], ",.0f"), n(r["cpu_us_per_record"], ".1f")]
            + [n(r.get("peak_rss_mb"), ".0f"), n(r.get("vs_smallest"), ".2f")]
            for r in report["sizes"]
        ),
    )
    wide = markdown(
        [*head, "CPU vs Quix (same guarantee)", "missing / unexp. / dup / late"],
        (
            [r["contender"], f"{r['records']:,}", f"{r['distinct']:,}"]
            + [n(r["records_per_s"], ",.0f"), n(r["cpu_us_per_record"], ".1f")]
            + [n(r.get("peak_rss_mb"), ".0f"), n(r.get("vs_quix"), ".2f")]
            + [checked(r)]
            for r in report["cardinality"]
        ),
    )
    return (
        f"Input size (flatness):\n\n{sizes}\n\nHigh cardinality (every record a new key):\n\n{wide}"
    )


def restore(report: dict) -> str:
    head = ["contender", "keys", "warm restart s", "cold restart s", "restore s", "keys/s"]
    head += ["CPU µs/key", "peak RSS MB", "probes restored"]
    return markdown(
        head,
        (
            [r["contender"], f"{r['keys']:,}", n(r["warm_restart_s"], ".2f")]
            + [n(r["cold_restart_s"], ".2f"), n(r["restore_s"], ".2f"), n(r["keys_per_s"], ",.0f")]
            + [n(r["cpu_us_per_key"], ".2f"), n(r["peak_rss_mb"], ".0f")]
            + [f"{r['probes_restored']}/{r['probes']}"]
            for r in report["rows"]
        ),
    )


def latency(report: dict) -> str:
    head = ["system", "guarantee", "rate rec/s", "p50 ms", "p95 ms", "p99 ms", "records"]
    return markdown(
        head,
        (
            [r.get("system", "logwheel"), r["guarantee"], n(r["rate"], "g")]
            + [n(r["hops"]["output"][k], ".1f") for k in ("p50", "p95", "p99")]
            + [r["hops"]["output"]["records"]]
            for r in report["rows"]
        ),
    )


def idle(report: dict) -> str:
    head = ["process", "% of a core", "wake-ups a second"]
    table = markdown(
        head,
        (
            [p["pid"], n(p["cpu_pct"], ".2f")]
            + [", ".join(f"{k} {v:g}" for k, v in p["wakeups_per_s"].items()) or "none"]
            for p in report["processes"]
        ),
    )
    writes = ", ".join(f"{k} {v:.2f}" for k, v in report["records_per_s"].items())
    return f"{report['seconds']:.0f} s idle; records/s written: {writes}\n\n{table}"


def latency_beside_throughput(latency: dict, throughput: dict) -> str:
    """Per guarantee, the record delay at a light rate beside the records/s of a backlog:
    the cadence adapts to both, and neither may be bought with the other."""
    rates = {r["contender"]: r for r in throughput["rows"]}
    rows = []
    for r in latency["rows"]:
        if r.get("system", "logwheel") != "logwheel":
            continue
        out, tp = r["hops"]["output"], rates.get(f"logwheel {r['guarantee']}", {})
        rows.append(
            [r["guarantee"], n(out["p50"], ".1f"), n(out["p95"], ".1f"), n(r["load"], ".1f")]
            + [n(tp.get("records_per_s"), ",.0f"), n(tp.get("cpu_us_per_record"), ".1f")]
        )
    head = ["guarantee", f"p50 ms at {latency['rate']:g}/s", "p95 ms", "load"]
    head += [f"records/s ({throughput['rows'][0]['records']:,})", "CPU µs/record"]
    return markdown(head, rows)


def watermark_lag(report: dict) -> str:
    return markdown(
        ["series", "mean lag ms", "stdev ms", "paper mean ms"],
        (
            [s["name"], n(s["mean"], ".0f"), n(s["stdev"], ".0f"), s.get("paper_mean")]
            for s in report["series"]
        ),
    )


def windowed(report: dict) -> str:
    head = ["contender", "records", "records/s", "CPU µs/record", "peak RSS MB"]
    head += ["CPU vs Quix (same guarantee)", "records/s vs Quix", "missing / unexp. / dup / late"]
    return (
        f"Tumbling 60 s count per key, {report['windows']:,} windows, median of "
        f"{report['repeat']} interleaved round(s):\n\n"
    ) + markdown(
        head,
        (
            [r["contender"], f"{r['records']:,}", n(r["records_per_s"], ",.0f")]
            + [n(r["cpu_us_per_record"], ".1f"), n(r.get("peak_rss_mb"), ".0f")]
            + [n(r.get("cpu_vs_quix"), ".2f"), n(r.get("vs_quix"), ".2f")]
            + [checked(r)]
            for r in report["rows"]
        ),
    )


def sink(report: dict) -> str:
    head = ["contender", "records", "rows/s", "CPU µs/row", "CPU vs floor", "rows/s vs floor"]
    head += ["peak RSS MB", "missing / unexp. / dup / late"]
    return (
        f"Into PostgreSQL, median of {report['repeat']} interleaved rounds "
        f"(aim: CPU within {report['aim_cpu_vs_floor']}x of the floor's):\n\n"
        + markdown(
            head,
            (
                [r["contender"], f"{r['records']:,}", n(r["rows_per_s"], ",.0f")]
                + [n(r["cpu_us_per_row"], ".1f"), n(r["cpu_vs_floor"], ".2f")]
                + [n(r["rows_per_s_vs_floor"], ".2f"), n(r.get("peak_rss_mb"), ".0f")]
                + [checked(r)]
                for r in report["rows"]
            ),
        )
    )


def query(report: dict) -> str:
    head = ["kind", "clients", "queries", "p50 ms", "p99 ms", "queries/s"]
    return f"State queries under {report['rate']} clicks/s, {report['keys']} keys:\n\n" + markdown(
        head,
        (
            [r["kind"], r["clients"], r["queries"], n(r["p50"], ".2f"), n(r["p99"], ".2f")]
            + [n(r["queries_per_s"], ",.0f")]
            for r in report["rows"]
        ),
    )


def join(report: dict) -> str:
    head = ["contender", "records", "results", "records/s", "CPU µs/record", "CPU vs Quix inner"]
    head += ["CPU vs Kafka Streams", "changelog B/record", "missing / unexp. / dup / late"]
    return f"{report['stage'].capitalize()}:\n\n" + markdown(
        head,
        (
            [r["contender"], f"{r['records']:,}", f"{r['results']:,}"]
            + [n(r["records_per_s"], ",.0f"), n(r["cpu_us_per_record"], ".1f")]
            + [n(r.get("cpu_vs_quix"), ".2f"), n(r.get("cpu_vs_kstreams"), ".2f")]
            + [n(r.get("changelog_bytes_per_record"), ".1f"), checked(r)]
            for r in report["rows"]
        ),
    )


RENDER: dict[str, Callable[[dict], str]] = {
    "throughput": throughput,
    "scaling": scaling,
    "restore": restore,
    "latency": latency,
    "watermark_lag": watermark_lag,
    "windowed": windowed,
    "join": join,
    "idle": idle,
    "query": query,
    "sink": sink,
}


def new_run(quick: bool) -> Path:
    """A directory of its own for one run of bench/run_all.py: bench/results/<run id>/, the
    run id its start time in UTC (and "-quick" for a reduced run)."""
    run = common.RESULTS / f"{datetime.now(UTC):%Y-%m-%dT%H-%M-%SZ}{'-quick' if quick else ''}"
    run.mkdir(parents=True)
    return run


def latest_run(quick: bool) -> Path | None:
    """The directory of the latest run (full or quick), if any."""
    runs = sorted(
        p for p in common.RESULTS.glob("*T*Z*") if p.is_dir() and p.name.endswith("-quick") == quick
    )
    return runs[-1] if runs else None


def summarize(run: Path, names: Sequence[str], elapsed_s: float | None = None) -> str:
    """Write `run`/summary.json from that run's results files of the named benchmarks (none
    from elsewhere); return the Markdown."""
    reports = {}
    for name in names:
        path = run / f"{name}.json"
        if path.exists():
            reports[name] = json.loads(path.read_text())
    out = run / "summary.json"
    out.write_text(
        json.dumps(
            {
                "run": run.name,
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "quick": run.name.endswith("-quick"),
                "elapsed_s": elapsed_s,
                "benchmarks": reports,
            },
            indent=2,
        )
        + "\n"
    )
    parts = [f"## make bench, run {run.name}"]
    some = next(iter(reports.values()), {})
    if machine := some.get("machine"):
        parts.append(
            f"{machine['cpus']} CPUs, load {', '.join(f'{x:.1f}' for x in machine['load_avg'])}, "
            f"Python {machine['python']}, librdkafka {machine['librdkafka']}"
        )
    wrong = {name for name, report in reports.items() if report.get("failed")}
    for name in names:
        if name not in reports:
            parts.append(f"### {name}\n\nno results: it failed before writing them")
        elif name in wrong:
            parts.append(f"### {name}\n\n" + "\n".join(reports[name]["failed"]))
    for name, render in RENDER.items():
        if name in reports and name not in wrong:
            parts.append(f"### {name}\n\n{render(reports[name])}")
    if {"latency", "throughput"} <= reports.keys() - wrong:
        side = latency_beside_throughput(reports["latency"], reports["throughput"])
        parts.append(f"### latency beside throughput\n\n{side}")
    parts.append(f"(all results of this run: {common.shown(out)})")
    return "\n\n".join(parts)


if __name__ == "__main__":
    given = [a for a in sys.argv[1:] if a != "--quick"]
    run = Path(given[0]) if given else latest_run("--quick" in sys.argv[1:])
    if run is None:
        sys.exit("summary: no run in bench/results/ yet (make bench makes one)")
    print(summarize(run, [p.stem for p in sorted(run.glob("*.json")) if p.stem != "summary"]))
