"""Runs every benchmark in bench/, one after the other, on one broker (`make bench`).

A benchmark is a module `bench/<name>.py` that defines `main(argv) -> int` and a top-level
`QUICK_ARGS` list: the arguments of its reduced run. Tools without `QUICK_ARGS` (bare_loop.py,
profile_runner.py) and common.py are skipped. To add one, drop such a module here (and a test
of its reduced run in tests/integration/bench/test_<name>.py).

    python bench/run_all.py [--quick] [--only NAME]... [--bootstrap H:P]

The bootstrap address is resolved once (--bootstrap, else LOGWHEEL_BOOTSTRAP, else the
embedded broker, started if needed) and passed to every benchmark as `--bootstrap`. Each
invocation has a directory of its own, bench/results/<run id>/ (the start time in UTC, and
`-quick`): each benchmark writes its figures to <name>.json there; at the end bench/summary.py
gathers that directory's files alone in its summary.json and prints Markdown tables, and the
plots are drawn there. A benchmark whose outputs differ from their reference (bench/verify.py)
exits 1 and shows no figure; the summary names it FAILED. The exit code is non-zero if any
benchmark failed.
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]
import peers  # noqa: E402
import summary  # noqa: E402

from framework.broker.bootstrap import bootstrap_from  # noqa: E402


def discover() -> list[str]:
    """Names of the benchmark modules in bench/ (top-level `QUICK_ARGS` and `def main`)."""
    return [
        path.stem
        for path in sorted(BENCH.glob("*.py"))
        if re.search(r"^QUICK_ARGS\b", text := path.read_text(), re.M)
        and re.search(r"^def main\(", text, re.M)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run every benchmark in bench/")
    parser.add_argument("--quick", action="store_true", help="each benchmark's reduced run")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only these")
    parser.add_argument("--bootstrap", help="else LOGWHEEL_BOOTSTRAP, else the embedded broker")
    args = parser.parse_args(argv)
    names = discover()
    if unknown := sorted(set(args.only or ()) - set(names)):
        parser.error(f"no benchmark {unknown}; there are {names}")
    names = [n for n in names if not args.only or n in args.only]
    bootstrap = bootstrap_from(args.bootstrap)
    run = summary.new_run(args.quick)
    print(f"results of this run: {summary.common.shown(run)}", flush=True)
    failed, began = [], time.monotonic()
    for name in names:
        module = importlib.import_module(name)
        bench_argv = [*(module.QUICK_ARGS if args.quick else []), "--bootstrap", bootstrap]
        bench_argv += ["--out", str(run / f"{name}.json")]
        print(f"== {name} {' '.join(bench_argv)}", flush=True)
        started = time.monotonic()
        try:
            code = module.main(bench_argv)
        except Exception:  # noqa: BLE001 - report it and go on with the others
            traceback.print_exc()
            code = 1
        if code:
            failed.append(name)
        print(f"== {name}: {'FAILED' if code else 'done'} in {time.monotonic() - started:.1f}s\n")
    elapsed = time.monotonic() - began
    print(summary.summarize(run, names, round(elapsed, 1)))
    plots = [str(peers.python("plots")), str(BENCH / "plots.py"), str(run)]
    try:
        subprocess.run(plots, check=True)
    except (OSError, subprocess.CalledProcessError) as error:  # figures are extra: say so
        print(f"plots: not drawn ({error})", file=sys.stderr)
    print(
        f"{len(names)} benchmark(s) in {elapsed:.1f}s"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
