"""How logwheel's CPU per record moves with the size of its input and the number of keys.

bench/throughput.py's method and contenders, the count-words stage:

- sizes: logwheel exactly_once and at_least_once (exactly_once alone with --quick) over 10%,
  40% and 100% of `--records` Zipf words (100,000, 400,000 and 1,000,000 at full size), the
  median of `--size-repeat` interleaved rounds (a run of 100,000 records is under a second of
  work, where one round's noise is of the order of the 10% being judged); the cost per record
  should be flat in the input size: `vs smallest` is the CPU per record over the smallest
  run's (flat: within 10% either way, issue 12);
- high cardinality: `--records` records, every one a key of its own, so the state (one
  document per key) is a hundred times the write-back cache (10,000 documents) and every
  record reads RocksDB; logwheel in both guarantees, beside Quix Streams with --peers.

Every run's outputs are checked as bench/throughput.py checks them (bench/verify.py); a
contender with a missing, unexpected, duplicated or late output fails the benchmark (exit 1)
and no figure is printed. The flatness line compares one contender's CPU per record over
inputs of different sizes in the same run (that is what it judges); `vs quix` compares
contenders on the same input in the same run.

    python bench/scaling.py [--records N] [--quick] [--repeat R] [--size-repeat R] [--peers]
                            [--bootstrap H:P]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, peers, throughput, verify  # noqa: E402

FULL = {"records": 1_000_000, "repeat": 1, "size_repeat": 3}
QUICK = {"records": 10_000, "repeat": 1, "size_repeat": 1}
QUICK_ARGS = ["--quick"]
FRACTIONS = (0.1, 0.4, 1.0)
LOGWHEEL = ["logwheel exactly_once", "logwheel at_least_once"]
QUIX = ["quix exactly_once", "quix at_least_once"]
FLAT = 0.10  # the largest run's CPU per record within this fraction of the smallest's


def distinct_keys(n: int, seed: int = 1) -> list[str]:
    """`n` keys, each once, in a random order."""
    keys = [f"k{i:07d}" for i in range(n)]
    random.Random(seed).shuffle(keys)
    return keys


def sizes(args: object, contenders: Sequence[str]) -> list[dict]:
    """logwheel's rows at each fraction of `args.records`, with `vs_smallest`."""
    rows: list[dict] = []
    rounds = argparse.Namespace(**{**vars(args), "repeat": args.size_repeat})
    for fraction in FRACTIONS:
        n = int(args.records * fraction)
        rows += throughput.run(rounds, contenders, throughput.zipf_words(n))
    for contender in contenders:
        mine = [r for r in rows if r["contender"] == contender]
        for r in mine:
            smallest = mine[0]["cpu_us_per_record"]
            cpu = r["cpu_us_per_record"]
            r["vs_smallest"] = cpu / smallest if cpu and smallest else None
    return rows


def table(rows: Sequence[dict], extra: str) -> str:
    f = common.fmt
    columns = [("contender", -24), ("records", 9), ("distinct", 9), ("records/s", 10)]
    columns += [("CPU us/rec", 10), ("RSS MB", 7), (extra, 10)]
    return common.table(
        columns,
        (
            [r["contender"], r["records"], r.get("distinct"), f(r["records_per_s"], ",.0f")]
            + [f(r["cpu_us_per_record"], ".1f"), f(r.get("peak_rss_mb"), ".0f")]
            + [f(r.get(extra.replace(" ", "_")), ".2f")]
            for r in rows
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("count-words CPU per record by input size and key count", FULL, QUICK)
    peers.add_option(parser, "Quix Streams beside logwheel at high cardinality")
    args = parser.parse(argv)
    print(f"scaling: the count-words stage up to {args.records} records, on {args.bootstrap}")
    logwheel = LOGWHEEL[:1] if args.quick else LOGWHEEL  # quick (make test): the path runs
    by_size = sizes(args, logwheel)
    keys = distinct_keys(args.records)
    wide = throughput.run(args, logwheel + (QUIX if args.peers else []), keys)
    quix = {
        r["contender"].split()[1]: r["cpu_us_per_record"] for r in wide if "quix" in r["contender"]
    }
    for r in wide:
        q = quix.get(r["contender"].split()[1])
        r["vs_quix"] = r["cpu_us_per_record"] / q if q and r["cpu_us_per_record"] else None
    what = lambda r: f"{r['contender']} ({r['records']:,} records)"  # noqa: E731
    failed = verify.failures(by_size + wide, what)
    if not failed:
        print()
        print(table(by_size, "vs smallest"))
        for contender in logwheel:
            mine = [r for r in by_size if r["contender"] == contender]
            growth = mine[-1].get("vs_smallest")
            if growth is not None:
                verdict = "flat" if abs(growth - 1) <= FLAT else "NOT flat"
                print(
                    f"{contender}: {verdict} ({growth:.2f}x from {mine[0]['records']:,} to "
                    f"{mine[-1]['records']:,} records; flat is within {FLAT:.0%})"
                )
        print()
        print(table(wide, "vs quix"))
    common.write_results(
        "scaling",
        args,
        stage="count-words",
        fractions=FRACTIONS,
        sizes=by_size,
        cardinality=wide,
        failed=failed,
    )
    return verify.report(failed)


if __name__ == "__main__":
    sys.exit(main())
