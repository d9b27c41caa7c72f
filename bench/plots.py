"""Histogram PNGs in the manner of MillWheel's Figures 13 (record delay) and 15 (low watermark
lag), drawn from latency.json and watermark_lag.json of one run's directory
(bench/results/<run id>/, bench/run_all.py), unless the run's check failed (bench/verify.py).

matplotlib is no dependency of logwheel: bench/run_all.py runs this script under an
interpreter of its own (bench/peers.py, the "plots" virtualenv, matplotlib pinned), so it
imports nothing but matplotlib and the standard library.

    <plots venv>/bin/python bench/plots.py RESULTS_DIR [--quick]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def latency(report: dict, out: Path) -> Path:
    """Figure 13: the distribution of record delays, one panel per contender."""
    rows = [r for r in report["rows"] if r.get("delays_ms")]
    fig, axes = plt.subplots(len(rows), 1, figsize=(7, 2.4 * len(rows)), squeeze=False)
    for ax, row in zip(axes[:, 0], rows, strict=True):
        delays = sorted(row["delays_ms"])
        top = delays[min(len(delays) - 1, int(0.99 * len(delays)))] * 1.2 or 1.0
        ax.hist([d for d in delays if d <= top], bins=60, color="#4477aa")
        p50, p95 = (row["hops"]["output"][k] for k in ("p50", "p95"))
        for value, style in ((p50, "-"), (p95, "--")):
            ax.axvline(value, color="black", linestyle=style, linewidth=1)
        system = row.get("system", "logwheel")
        ax.set_title(
            f"{system} {row['guarantee']}: p50 {p50:.1f} ms, p95 {p95:.1f} ms "
            f"({len(delays)} records, {row['rate']:g}/s)",
            fontsize=9,
        )
        ax.set_ylabel("records")
    axes[-1, 0].set_xlabel("record delay, ms (send -> visible downstream)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def watermark_lag(report: dict, out: Path) -> Path:
    """Figure 15: the low watermark lag of each stage over the measured seconds."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for series in report["series"]:
        lags = series.get("lags_ms") or []
        ax.plot(
            range(len(lags)), [None if v is None else v / 1000 for v in lags], label=series["name"]
        )
    ax.set_xlabel("seconds")
    ax.set_ylabel("low watermark lag, s")
    ax.set_title("low watermark lag per stage (MillWheel Figure 15)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str]) -> int:
    results, quick = Path(argv[0]), "--quick" in argv[1:]
    suffix = ".quick" if quick else ""
    for name, draw in (("latency", latency), ("watermark_lag", watermark_lag)):
        path = results / f"{name}{suffix}.json"
        report = json.loads(path.read_text()) if path.exists() else {}
        if report and not report.get("failed"):  # no figure of a wrong run
            png = draw(report, results / f"{name}{suffix}.png")
            print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
