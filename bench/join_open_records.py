"""CPU per record of `pipeline.join` for one key as the key's open records grow (a tool, not
a benchmark of `make bench`: no broker, the Harness, process CPU time).

Why: bench/join.py's full run (1M records, Zipf customers) stalled in logwheel, not in its
peers. A join keeps a record until the input low watermark (the lower of its two inputs')
closes its window, so when a consumer reads one input ahead of the other, a busy key holds
many records; each record of that key then costs time in proportion to how many it holds (the
key's state was one document, scanned for partners, searched for the earliest close and
encoded whole after every record), so the key cost the square of its records; partners are now
found by bisection and the document encoded once per commit (the Harness commits after every
record, so here it still is per record). This prints that growth: `n` orders of one key 1 ms
apart with the watermark held, then `n` payments of it, whose results (each payment meets the
orders 0 to 2 ms before it: 3n - 3 pairs) are checked before a row is printed.

    python bench/join_open_records.py [N ...]     # default 500 1000 2000 4000
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from framework import Pipeline  # noqa: E402
from framework.testing import Harness  # noqa: E402


def harness() -> Harness:
    pipeline = Pipeline("open-records")
    pipeline.source("orders")
    pipeline.source("payments")
    pipeline.join(
        "j",
        left="orders",
        right="payments",
        inputs={"orders": None, "payments": None},
        before_ms=0,
        after_ms=2,
        output="out",
    )
    return Harness(pipeline, "j")


def measure(n: int) -> tuple[float, float, int]:
    """CPU µs per order, per payment, and the results, for `n` of each on one key."""
    h = harness()
    t0 = time.process_time()
    for i in range(n):
        h.send("orders", "k0", {"id": f"o{i}"}, 1_000 + i)
    t1 = time.process_time()
    for i in range(n):
        h.send("payments", "k0", {"id": f"p{i}"}, 1_000 + i)
    t2 = time.process_time()
    return (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, len(h.outputs("out"))


def main(argv: Sequence[str] | None = None) -> int:
    sizes = [int(a) for a in (sys.argv[1:] if argv is None else argv)] or [500, 1000, 2000, 4000]
    print("open records of the key | CPU µs per order | CPU µs per payment | results")
    for n in sizes:
        order, payment, results = measure(n)
        if results != 3 * n - 3:
            print(f"WRONG: {results:,} results for {n:,} of each, not {3 * n - 3:,}")
            return 1
        print(f"{n:23,} | {order:16.0f} | {payment:18.0f} | {results:,}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
