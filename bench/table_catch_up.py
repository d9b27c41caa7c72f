"""How fast another team's process reads a changelog as a table: `ChangelogTable.catch_up()`
in memory and RocksDB-backed (`path=`), over the same pre-filled compacted topic of distinct
keys with JSON state documents, and a reopened RocksDB table reading only the tail.

Before the figures are shown each table is checked (bench/verify.py): its contents, key by
key, against what was written (the reopened table with the one record written since, which
must be all it reads); a key `missing` or `unexpected` (a wrong value is one missing and one
unexpected) fails the benchmark (exit 1).

    python bench/table_catch_up.py [--records N] [--quick] [--bootstrap H:P]
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Producer  # noqa: E402

from bench import common, verify  # noqa: E402
from changelog import ChangelogTable  # noqa: E402

QUICK_ARGS = ["--quick"]


def document(i: int) -> dict:
    return {"name": f"user {i}", "country": "FR", "version": 1}


def contents(table: ChangelogTable) -> collections.Counter[tuple[str, str]]:
    """A table's rows as (key, its value as sorted JSON), counted."""
    return collections.Counter((k, json.dumps(v, sort_keys=True)) for k, v in table.items())


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(__doc__.splitlines()[0], {"records": 1_000_000}, {"records": 20_000})
    args = parser.parse(argv)
    written = {f"u{i}": json.dumps(document(i), sort_keys=True) for i in range(args.records)}
    checks = []
    with common.Workspace(args.bootstrap, "table", args.keep) as ws:
        topic = f"{ws.run}-changelog"
        ws.create_topics([topic], 4)
        producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
        for i in range(args.records):
            value = json.dumps(document(i)).encode()
            while True:
                try:
                    producer.produce(topic, value, f"u{i}".encode())
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.flush(120)
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for kind, path in (("memory", None), ("rocksdb", Path(tmp) / "t")):
                t0, cpu0 = time.monotonic(), time.process_time()
                with ChangelogTable(topic, bootstrap=args.bootstrap, path=path) as table:
                    n = len(table.catch_up(progress=False))
                    seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
                    checks.append(
                        {"contender": kind, **verify.compare(written.items(), contents(table))}
                    )
                rows.append(
                    (kind, args.records, round(seconds, 2), round(n / seconds),
                     round(cpu / n * 1e6, 1))
                )  # fmt: skip
            producer.produce(topic, b'{"name": "x"}', b"u0")
            producer.flush(30)
            written["u0"] = json.dumps({"name": "x"})
            t0 = time.monotonic()
            with ChangelogTable(topic, bootstrap=args.bootstrap, path=Path(tmp) / "t") as table:
                table.catch_up(progress=False)
                seconds, tail = round(time.monotonic() - t0, 2), table.read
                checks.append(
                    {
                        "contender": "rocksdb reopened",
                        **verify.compare(written.items(), contents(table)),
                    }
                )
            rows.append(("rocksdb reopened", tail, seconds, "", ""))
    failed = verify.failures(checks)
    if tail != 1:  # more would be a read from the start, not of the tail
        failed.append(f"FAILED: rocksdb reopened: read {tail} records, not the 1 written since")
    if not failed:
        columns = [("table", 18), ("records", 9), ("seconds", 8), ("records/s", 10)]
        print(common.table([*columns, ("CPU us/rec", 11)], rows))
    common.write_results("table_catch_up", args, rows=rows, checks=checks, failed=failed)
    return verify.report(failed)


if __name__ == "__main__":
    sys.exit(main())
