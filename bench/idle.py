"""What an idle job costs the broker and the machine (issue 7 item 5, issue 25 item 6): a
two-stage wordcount drains a few lines, then sits idle; over `--seconds`, the records it adds
to its own topics and to `__transaction_state` and `__consumer_offsets` (end offsets summed
over partitions; run on a broker of its own for those two: other clients' transactions count
too), the CPU of each of its processes (% of one core, from /proc), and what still wakes each
process: context switches a second per thread kind (the Python loop; librdkafka's broker
threads, one per client and broker; its main and background threads; RocksDB's).

Before the figures are shown the run is checked (bench/verify.py): once the job has stopped,
its counts topic is read to its end (read_committed) and must hold, per word of the lines,
the counts 1, 2, ..., n exactly once each; a `missing`, `unexpected` or `duplicated` count
fails the benchmark (exit 1). An idle job that wrote anything wrong is no idle figure.

    python bench/idle.py [--seconds S] [--quick] [--bootstrap H:P]
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench import common, throughput, verify  # noqa: E402
from framework.kafka.topic_ends import end_offsets as topic_ends  # noqa: E402
from framework.kafka.topic_ends import watermark_offsets  # noqa: E402
from framework.kafka.topics import pipeline_topics  # noqa: E402
from tests.support import Wordcount  # noqa: E402

QUICK_ARGS = ["--quick"]
INTERNAL = ("__transaction_state", "__consumer_offsets")
SETTLE_S = 10.0  # after the last count: the drained input's last commits and marks


def end_offsets(bootstrap: str) -> dict[str, int]:
    """Each internal topic's end offsets, summed over its partitions."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "logwheel-bench-idle"})
    try:
        topics = consumer.list_topics(timeout=30).topics
        return {
            name: sum(
                watermark_offsets(consumer, TopicPartition(name, p))[1]
                for p in topics[name].partitions
            )
            for name in INTERNAL
            if name in topics
        }
    finally:
        consumer.close()


def threads(pid: int) -> dict[int, tuple[str, int, int]]:
    """Each thread of `pid`: (kind, CPU ticks, context switches so far)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        switches = sum(int(n) for n in re.findall(r"ctxt_switches:\s+(\d+)", status))
        kind = re.sub(r"\d+$", "", name) if name.startswith("rdk:") else name
        found[int(task.name)] = (kind, int(fields[11]) + int(fields[12]), switches)
    return found


def sample(pid: int) -> dict[int, dict[int, tuple[str, int, int]]]:
    """`threads` of every process of the job's tree."""
    return {p: threads(p) for p in common._tree(pid)}


def costs(before: dict, after: dict, seconds: float) -> list[dict]:
    """Per process: % of a core, and wake-ups a second per thread kind."""
    tick, rows = os.sysconf("SC_CLK_TCK"), []
    for pid, now in after.items():
        then = before.get(pid, {})
        cpu, wakes = 0, {}
        for tid, (kind, ticks, switches) in now.items():
            _, ticks0, switches0 = then.get(tid, (kind, 0, 0))
            cpu += ticks - ticks0
            wakes[kind] = wakes.get(kind, 0) + (switches - switches0) / seconds
        rows.append(
            {
                "pid": pid,
                "threads": len(now),
                "cpu_pct": 100 * cpu / tick / seconds,
                "wakeups_per_s": {k: round(v, 1) for k, v in sorted(wakes.items()) if v >= 0.05},
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(__doc__.splitlines()[0], {"seconds": 60}, {"seconds": 5})
    args = parser.parse(argv)
    with common.Workspace(args.bootstrap, "idle", args.keep) as ws:
        wc = Wordcount(args.bootstrap, ws.dir)
        admin = AdminClient({"bootstrap.servers": args.bootstrap})
        own = [(t.name, p) for t in pipeline_topics(wc.pipeline) for p in range(t.partitions)]
        wc.send_lines(200)
        job = wc.job().start()
        try:
            wc.read_counts()
            time.sleep(SETTLE_S)
            before, ends0 = end_offsets(args.bootstrap), topic_ends(admin, own, committed=False)
            cpu0, t0 = sample(job.proc.pid), time.monotonic()
            time.sleep(args.seconds)
            seconds = time.monotonic() - t0
            cpu1 = sample(job.proc.pid)
            after, ends1 = end_offsets(args.bootstrap), topic_ends(admin, own, committed=False)
        finally:
            job.stop()
        written = verify.read(args.bootstrap, [wc.counts_topic], word_count)
    expected = [(w, c) for w, n in wc.words.items() for c in range(1, n + 1)]
    check = verify.compare(expected, written)
    failed = verify.failures([check], lambda _: "the wordcount job")
    if failed:
        common.write_results("idle", args, **check, failed=failed)
        return verify.report(failed)
    rates = {name: (after[name] - before.get(name, 0)) / seconds for name in after}
    rates["its own topics"] = sum(ends1[tp] - ends0[tp] for tp in own) / seconds
    processes = costs(cpu0, cpu1, seconds)
    load = os.getloadavg()[0]
    for name, rate in rates.items():
        print(f"{name}: {rate:.2f} records/s over {seconds:.0f} s while idle")
    for p in processes:
        wakes = ", ".join(f"{k} {v:g}/s" for k, v in p["wakeups_per_s"].items())
        print(f"process {p['pid']}: {p['cpu_pct']:.2f}% of a core; wake-ups: {wakes or 'none'}")
    worst = max(p["cpu_pct"] for p in processes)
    print(f"idle CPU: {worst:.2f}% of a core in the busiest process (load {load:.1f})")
    common.write_results(
        "idle",
        args,
        seconds=seconds,
        records_per_s=rates,
        processes=processes,
        cpu_pct_max=worst,
        load=load,
        settle_s=SETTLE_S,
        **check,
        failed=failed,
    )
    return verify.report(failed)


def word_count(msg) -> tuple[str | None, int | None]:
    """A count the job wrote, as (word, count)."""
    return throughput.word_count(msg)[1:]


if __name__ == "__main__":
    sys.exit(main())
