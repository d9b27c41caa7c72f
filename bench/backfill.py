"""Backfill throughput beside streaming catch-up: wordcount's CountWords over the same history.

For each size (a quarter and all of `--records`; `--sizes 3` adds a sixteenth): a pre-filled
`words` topic (JSON {"word": w} keyed by the word, Zipf over 10,000 words, 4 partitions); then,
each with a consumer group, changelog and output topic of its own:

- `backfill <master>`: `logwheel backfill --master ...` as a process of its own (what a user
  runs: JVM and Spark startup included), for each of `--masters`: `local[2]`, and
  `standalone-N`, a Spark standalone cluster of N one-core workers on loopback (Spark's own
  master and workers, `framework.backfill.standalone`, started before the sizes and stopped
  at the end); `seconds` from launch until it exited, `in-run s` the backfill's own time from
  its summary line (plan, Spark jobs, hand-over: no JVM start), and its timeline (seconds since
  the backfill began: session, plan, first task began, last task ended, tasks' job done,
  hand-over done);
- `streaming`: `logwheel run` of the same computation catching up from the start of the
  history; `seconds` from launch until every output is readable (read_committed), so process
  startup is included here too.

Every run is checked before any figure is shown (bench/verify.py): once the backfill has
exited or the streaming job has stopped, the output topic is read to its end (read_committed)
and compared with bench/throughput.py's reference, one output per input record carrying the
word's count so far; a `missing`, `unexpected`, `duplicated` or `late` output fails the
benchmark (exit 1). records/s = records / seconds; CPU
is user + system time of the process and all its descendants (the JVM and Python workers for
Spark; a standalone cluster's executors are the workers' children, so their CPU is sampled
from the workers, less what the idle workers had used before), sampled until it ends;
`CPU us/rec` = CPU / records. The fixed cost of each contender is the intercept of its time
over the sizes (seconds = fixed + records x marginal, from the smallest and largest size).
One run per size, same broker.

    python bench/backfill.py [--records N] [--sizes K] [--masters local[2],standalone-2]
                             [--quick] [--bootstrap H:P]
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, verify  # noqa: E402
from bench.throughput import PARTITIONS, Gate, Outputs, reference, word_count, zipf_words  # noqa: E402
from framework.backfill import standalone as standalone_cluster  # noqa: E402
from framework.backfill.standalone import client_conf, standalone  # noqa: E402
from framework.private_files import write_private  # noqa: E402
from tests.support import REPO  # noqa: E402

QUICK_ARGS = ["--quick"]
TIMEOUT_S = 1800.0
MASTERS = "local[2],standalone-1,standalone-2"


class CpuSampler:
    """Samples the CPU seconds of a process tree until it ends (its children die with it)."""

    def __init__(self, pid: int, *others: int) -> None:
        self.pid, self.cpu, self.others = pid, 0.0, others
        self._before = sum(common.cpu_seconds(p) or 0.0 for p in others)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            cpu = common.cpu_seconds(self.pid)
            if cpu is None:
                return
            cpu += sum(common.cpu_seconds(p) or 0.0 for p in self.others) - self._before
            self.cpu = max(self.cpu, cpu)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(5)
        return self.cpu


class Cluster:
    """Where a backfill runs: `local[2]`, or `standalone-N` (started on first use)."""

    def __init__(self, master: str, stack: contextlib.ExitStack) -> None:
        self.name, self.stack = master, stack
        self.cluster: standalone_cluster.Cluster | None = None

    @property
    def workers(self) -> tuple[int, ...]:
        return self.cluster.workers if self.cluster else ()

    def args(self, ws: common.Workspace, config: Path) -> list[str]:
        if not self.name.startswith("standalone-"):
            return ["--master", self.name]
        if self.cluster is None:
            n = int(self.name.split("-")[1])
            self.cluster = self.stack.enter_context(standalone(workers=n, cores=1))
        conf = client_conf(self.cluster, f"{ws.dir}{os.pathsep}{REPO}")
        # it holds the cluster's secret: a file of this user's alone
        write_private(config, "[spark]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in conf.items()))
        return ["--master", self.cluster.url, "--config", str(config)]


def run_backfill(ws: common.Workspace, name: str, words: str, expected: collections.Counter,
                 cluster: Cluster) -> dict:  # fmt: skip
    pipeline = ws.pipeline(
        "bench.throughput:count_words", name, words, f"{name}-out", "exactly_once"
    )
    ws.topics.append(f"{pipeline.name}.count-words.backfill")
    env = {**os.environ, "PYTHONPATH": f"{ws.dir}{os.pathsep}{REPO}", "SPARK_LOCAL_IP": "127.0.0.1"}
    args = [sys.executable, "-m", "framework.cli", "backfill", f"{name.replace('-', '_')}:pipeline"]
    args += ["--computation", "count-words", "--bootstrap", ws.bootstrap]
    args += cluster.args(ws, Path(ws.dir) / f"{name}.toml")
    t0 = time.monotonic()
    proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = CpuSampler(proc.pid, *cluster.workers)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    seconds, cpu = time.monotonic() - t0, sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"backfill failed: {err.decode()[-3000:]}")
    summary = out.decode().strip().splitlines()[-1]
    in_run = float(re.search(r" ([\d.]+) s, ", summary).group(1))
    found = re.search(r"timeline \(s\): (.*)", err.decode())
    return {"contender": f"backfill {cluster.name}", "seconds": seconds, "in_run_s": in_run,
            "cpu_s": cpu, "timeline": found.group(1).strip() if found else None,
            **checked(ws, name, expected, 0)}  # fmt: skip


def run_streaming(ws: common.Workspace, name: str, words: str, expected: collections.Counter,
                  _: object) -> dict:  # fmt: skip
    pipeline = ws.pipeline(
        "bench.throughput:count_words", name, words, f"{name}-out", "exactly_once"
    )
    job = ws.job(pipeline, "count-words")
    outputs = Outputs(ws.bootstrap, f"{name}-out")
    records = sum(expected.values())
    t0 = time.monotonic()
    job.start()
    try:
        sampler = CpuSampler(job.proc.pid)
        outputs.wait(records, TIMEOUT_S, lambda: common.check(job), fail=False)
        seconds = time.monotonic() - t0
        cpu = sampler.stop()
    finally:
        job.stop()
        outputs.close()
    short = max(0, records - outputs.seen)
    return {"contender": "streaming", "seconds": seconds, "in_run_s": None, "cpu_s": cpu,
            **checked(ws, name, expected, short)}  # fmt: skip


def checked(ws: common.Workspace, name: str, expected: collections.Counter, short: int) -> dict:
    """The records, the outputs written and their check against `expected`, read to the end
    of the output topic (its writer has stopped)."""
    written = verify.read(ws.bootstrap, [f"{name}-out"], word_count)
    return {
        "records": sum(expected.values()),
        "outputs": sum(written.values()),
        **verify.compare(expected, written, short_at_end=short),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(
        __doc__.splitlines()[0], {"records": 4_000_000, "sizes": 2}, {"records": 4_000, "sizes": 1}
    )
    parser.add_argument("--masters", help=f"where backfills run ({MASTERS}; local[2] quick)")
    args = parser.parse(argv)
    masters = (args.masters or ("local[2]" if args.quick else MASTERS)).split(",")
    sizes = [args.records >> (2 * shift) for shift in reversed(range(args.sizes))]
    rows = []
    with common.Workspace(args.bootstrap, "bf", args.keep) as ws, contextlib.ExitStack() as stack:
        clusters = [Cluster(m, stack) for m in masters]
        for size in sizes:
            words = f"{ws.run}-{size}-words"
            ws.create_topics([words], PARTITIONS)
            history = zipf_words(size)
            gate = Gate(ws.bootstrap, words, history)  # warm-up records first
            gate.open()
            expected = reference(history)
            contenders = [(c.name, run_backfill, c) for c in clusters]
            for tag, run, where in [*contenders, ("streaming", run_streaming, None)]:
                name = f"{ws.run}-{size}-{re.sub(r'[^a-z0-9]', '', tag)}"
                row = run(ws, name, words, expected, where)
                row["records_per_s"] = row["records"] / row["seconds"]
                row["cpu_us_per_record"] = row["cpu_s"] / row["records"] * 1e6
                rows.append(row)
                rate, cpu = row["records_per_s"], row["cpu_s"]
                what = row["contender"]
                line = f"{size:>9,} {what:22} {row['seconds']:7.1f}s {rate:9,.0f} rec/s"
                if not verify.passed(row):
                    line = f"{size:>9,} {what:22} {verify.describe(row)}"
                print(f"  {line}, CPU {cpu:.1f}s", flush=True)
                if row.get("timeline"):
                    print(f"            timeline (s): {row['timeline']}", flush=True)
    failed = verify.failures(rows, lambda r: f"{r['contender']} ({r['records']:,} records)")
    if not failed:
        print_tables(rows)
    common.write_results("backfill", args, rows=rows, fixed=fixed_costs(rows), failed=failed)
    return verify.report(failed)


def print_tables(rows: list[dict]) -> None:
    columns = [("contender", -22), ("records", 9), ("seconds", 8), ("in-run s", 9),
               ("records/s", 10), ("CPU us/rec", 11)]  # fmt: skip
    print(common.table(columns, [
        (r["contender"], r["records"], round(r["seconds"], 1),
         None if r["in_run_s"] is None else round(r["in_run_s"], 1),
         round(r["records_per_s"]), round(r["cpu_us_per_record"], 1))
        for r in rows
    ]))  # fmt: skip
    marginal = fixed_costs(rows, marginal=True)
    if marginal:
        print(common.table([("contender", -22), ("fixed s", 8), ("marginal wall us/rec", 21)], [
            (c, round(f, 1), round(m * 1e6, 1)) for c, (f, m) in marginal.items()
        ]))  # fmt: skip


def fixed_costs(rows: list[dict], marginal: bool = False) -> dict:
    """Per contender, the fixed seconds of the line through its smallest and largest size's
    times (with `marginal`: (fixed seconds, marginal seconds per record))."""
    found = {}
    for contender in dict.fromkeys(r["contender"] for r in rows):
        mine = sorted((r["records"], r["seconds"]) for r in rows if r["contender"] == contender)
        (n0, t0), (n1, t1) = mine[0], mine[-1]
        if n1 > n0:
            slope = (t1 - t0) / (n1 - n0)
            found[contender] = (t0 - slope * n0, slope) if marginal else t0 - slope * n0
    return found


if __name__ == "__main__":
    sys.exit(main())
