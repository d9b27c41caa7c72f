"""Sink: rows per second and CPU per row into PostgreSQL, logwheel's exactly-once sink
(`PostgresSink`, append, batches of 1,000 rows each in one transaction with its offset) beside
the floor: a plain at-least-once confluent-kafka + psycopg loop on the same input
(bench/sink_floor.py: COPY, database commit, group commit). The aim: the sink within 1.5x of
the floor's CPU per row.

Each contender gets `--records` orders (JSON, two partitions) in its topic and a table of its
own: the first 100 readable at once, the rest behind a gate (bench/common.py's, a transaction
left open). It is started; once the first 100 rows are in its table (start-up, imports and the
group join done) the clock and its process's CPU are read and the gate opened, and again when
the last row is in: rows/s and CPU µs/row are over the rows between. Rounds are interleaved
(`--repeat`, medians).
Before any figure is shown each round is checked row for row (bench/verify.py): the table's
(order id, amount, customer) rows against the input's — a `missing`, `unexpected` or
`duplicated` row fails the benchmark (exit 1). The PostgreSQL server is the tests' own
(tests/support_postgres.py: Debian's binaries, `make postgres`), its server CPU not counted.

    python bench/sink.py [--records N] [--repeat N] [--quick] [--bootstrap H:P] [--out F]
"""

from __future__ import annotations

import collections
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, verify  # noqa: E402
from tests.support import Job  # noqa: E402
from tests.support_postgres import shared_postgres  # noqa: E402

FULL = {"records": 200_000, "repeat": 3}
QUICK = {"records": 2_000, "repeat": 1}
QUICK_ARGS = ["--quick"]
PARTITIONS = 2
CONTENDERS = ["logwheel exactly_once", "floor at_least_once"]
TABLE = "CREATE TABLE {} (order_id text, amount integer, customer text, logwheel_id text)"
DONE_TIMEOUT_S = 600.0
WARMUP = 100


def order(i: int) -> dict:
    return {"order_id": f"o{i}", "amount": i % 1000, "customer": f"customer-{i % 997}"}


def measure(ws: common.Workspace, dsn: str, records: int, contender: str, attempt: int) -> dict:
    slug = f"{ws.run}-{'lw' if contender.startswith('logwheel') else 'floor'}-{attempt}"
    table = slug.replace("-", "_")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(TABLE.format(table))
    if contender.startswith("logwheel"):
        build = "tests.integration.sink_job:orders_sink"
        pipeline = ws.pipeline(build, slug, f"{slug}-", dsn, table, None, 1000, PARTITIONS)
        ws.groups.append(f"{slug}.db")
        topic, job = f"{slug}-orders", ws.job(pipeline)
    else:
        topic = f"{slug}-orders"
        ws.create_topics([topic], PARTITIONS)
        ws.groups.append(slug)
        job = Job("floor", bootstrap=ws.bootstrap, state_dir=ws.dir / slug, path=ws.dir)
        job.args = [sys.executable, str(common.BENCH / "sink_floor.py")]
        job.args += ["--bootstrap", ws.bootstrap, "--topic", topic, "--group", slug]
        job.args += ["--dsn", dsn, "--table", table]
    gate = common.Gate(ws.bootstrap)
    for i in range(records):
        if i == WARMUP:
            gate.warmed()  # the warm-up is readable at once, the rest once the gate opens
        value = order(i)
        gate.send(topic, json.dumps(value).encode(), value["customer"].encode())
    started = time.monotonic()
    job.start()
    try:
        _wait_rows(dsn, table, WARMUP, job)
        t0, cpu0 = time.monotonic(), common.cpu_seconds(job.proc.pid)
        gate.open()
        _wait_rows(dsn, table, records, job)
        t1, cpu1 = time.monotonic(), common.cpu_seconds(job.proc.pid)
        rss = common.peak_rss_mb(job.proc.pid)
    finally:
        job.stop()
        gate.close()
    rows = records - WARMUP
    with psycopg.connect(dsn) as conn:
        written = collections.Counter(
            conn.execute(f"SELECT order_id, amount, customer FROM {table}").fetchall()
        )
        conn.execute(f"DROP TABLE {table}")
        conn.commit()
    expected = [(o["order_id"], o["amount"], o["customer"]) for o in map(order, range(records))]
    return {
        "startup_s": t0 - started,
        "seconds": t1 - t0,
        "rows": rows,
        "rows_per_s": rows / (t1 - t0) if t1 > t0 else None,
        "cpu_us_per_row": None if None in (cpu0, cpu1) or not rows else (cpu1 - cpu0) / rows * 1e6,
        "peak_rss_mb": rss,
        **verify.compare(expected, written),
    }


def _wait_rows(dsn: str, table: str, n: int, job: Job) -> int:
    """Until `table` has at least `n` rows; how many it has then."""
    deadline = time.monotonic() + DONE_TIMEOUT_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            if count >= n:
                return count
            common.check(job, deadline=deadline, what=f"{n} rows in {table}")
            time.sleep(0.02)


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("exactly-once into PostgreSQL beside a plain loop", FULL, QUICK)
    args = parser.parse(argv)
    print(f"sink: {args.records} records, {args.repeat} round(s), on {args.bootstrap}")
    with shared_postgres() as server, common.Workspace(args.bootstrap, "sk", args.keep) as ws:
        runs = common.interleave(
            args.repeat,
            CONTENDERS,
            lambda kind, attempt: measure(ws, server.dsn(), args.records, kind, attempt),
            lambda r: (
                f"{common.fmt(r['rows_per_s'], ',.0f')} rows/s, "
                f"{common.fmt(r['cpu_us_per_row'], '.1f')} CPU µs/row; {verify.describe(r)}"
            ),
        )
    rows = [_row(kind, args.records, results) for kind, results in runs.items()]
    floor = rows[-1]
    for r in rows:
        r["cpu_vs_floor"] = _ratio(r["cpu_us_per_row"], floor["cpu_us_per_row"])
        r["rows_per_s_vs_floor"] = _ratio(r["rows_per_s"], floor["rows_per_s"])
    failed = verify.failures(rows)
    if not failed:
        print()
        print(table(rows))
    common.write_results("sink", args, records=args.records, repeat=args.repeat, rows=rows,
                         failed=failed, aim_cpu_vs_floor=1.5)  # fmt: skip
    return verify.report(failed)


def _row(contender: str, records: int, results: list[dict]) -> dict:
    def median(key: str) -> float | None:
        values = [r[key] for r in results if r[key] is not None]
        return statistics.median(values) if values else None

    return {
        "contender": contender,
        "records": records,
        "rows_per_s": median("rows_per_s"),
        "cpu_us_per_row": median("cpu_us_per_row"),
        "startup_s": median("startup_s"),
        "peak_rss_mb": max((r["peak_rss_mb"] or 0 for r in results), default=0) or None,
        **verify.worst(results),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def table(rows: Sequence[dict]) -> str:
    f = common.fmt
    columns = [("contender", -24), ("records", 9), ("rows/s", 9), ("CPU us/row", 10)]
    columns += [("CPU vs floor", 12), ("rows/s vs floor", 15), ("RSS MB", 7)]
    return common.table(
        columns,
        (
            [r["contender"], r["records"], f(r["rows_per_s"], ",.0f")]
            + [f(r["cpu_us_per_row"], ".1f"), f(r["cpu_vs_floor"], ".2f")]
            + [f(r["rows_per_s_vs_floor"], ".2f"), f(r["peak_rss_mb"], ".0f")]
            for r in rows
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
