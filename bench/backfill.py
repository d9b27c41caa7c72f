"""Backfill throughput beside streaming catch-up: wordcount's CountWords over the same history.

For each size (half and all of `--records`; `--sizes 3` adds a quarter): a pre-filled `words`
topic (JSON {"word": w} keyed by the word, Zipf over 10,000 words, 4 partitions); then, each
with a consumer group, changelog and output topic of its own:

- `backfill`: `logwheel backfill --master local[2]` as a process of its own (what a user runs:
  JVM and Spark startup included); `seconds` from launch until it exited, `in-run s` the
  backfill's own time from its summary line (plan, Spark jobs, hand-over: no JVM start);
- `streaming`: `logwheel run` of the same computation catching up from the start of the
  history; `seconds` from launch until every output is readable (read_committed), so process
  startup is included here too.

Every run's outputs are counted (one per input record). records/s = records / seconds; CPU
is user + system time of the process and all its descendants (the JVM and Python workers for
Spark), sampled until it ends; `CPU us/rec` = CPU / records. One run per size, same broker.

    python bench/backfill.py [--records N] [--quick] [--bootstrap H:P]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common  # noqa: E402
from bench.throughput import PARTITIONS, Gate, Outputs, zipf_words  # noqa: E402
from tests.support import REPO  # noqa: E402

QUICK_ARGS = ["--quick"]
TIMEOUT_S = 1800.0


class CpuSampler:
    """Samples the CPU seconds of a process tree until it ends (its children die with it)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.cpu = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            cpu = common.cpu_seconds(self.pid)
            if cpu is None:
                return
            self.cpu = max(self.cpu, cpu)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(5)
        return self.cpu


def run_backfill(ws: common.Workspace, name: str, words: str, records: int) -> dict:
    pipeline = ws.pipeline(
        "bench.throughput:count_words", name, words, f"{name}-out", "exactly_once"
    )
    ws.topics.append(f"{pipeline.name}.count-words.backfill")
    env = {**os.environ, "PYTHONPATH": f"{ws.dir}{os.pathsep}{REPO}"}
    args = [sys.executable, "-m", "framework.cli", "backfill", f"{name.replace('-', '_')}:pipeline"]
    args += ["--computation", "count-words", "--bootstrap", ws.bootstrap, "--master", "local[2]"]
    outputs = Outputs(ws.bootstrap, f"{name}-out")
    t0 = time.monotonic()
    proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = CpuSampler(proc.pid)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    seconds, cpu = time.monotonic() - t0, sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"backfill failed: {err.decode()[-3000:]}")
    summary = out.decode().strip().splitlines()[-1]
    in_run = float(re.search(r" ([\d.]+) s, ", summary).group(1))
    outputs.wait(records, 120, lambda: None)
    seen = outputs.seen
    outputs.close()
    return {"contender": "backfill", "records": records, "seconds": seconds, "in_run_s": in_run,
            "cpu_s": cpu, "outputs": seen}  # fmt: skip


def run_streaming(ws: common.Workspace, name: str, words: str, records: int) -> dict:
    pipeline = ws.pipeline(
        "bench.throughput:count_words", name, words, f"{name}-out", "exactly_once"
    )
    job = ws.job(pipeline, "count-words")
    outputs = Outputs(ws.bootstrap, f"{name}-out")
    t0 = time.monotonic()
    job.start()
    try:
        sampler = CpuSampler(job.proc.pid)
        outputs.wait(records, TIMEOUT_S, lambda: common.check(job))
        seconds = time.monotonic() - t0
        cpu = sampler.stop()
    finally:
        job.stop()
        seen = outputs.seen
        outputs.close()
    return {"contender": "streaming", "records": records, "seconds": seconds, "in_run_s": None,
            "cpu_s": cpu, "outputs": seen}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(
        __doc__.splitlines()[0], {"records": 1_000_000, "sizes": 2}, {"records": 4_000, "sizes": 1}
    )
    args = parser.parse(argv)
    sizes = [args.records >> shift for shift in reversed(range(args.sizes))]
    rows = []
    with common.Workspace(args.bootstrap, "bf", args.keep) as ws:
        for size in sizes:
            words = f"{ws.run}-{size}-words"
            ws.create_topics([words], PARTITIONS)
            gate = Gate(ws.bootstrap, words, zipf_words(size))  # warm-up records first
            gate.open()
            expected = size + PARTITIONS
            for contender, run in (("backfill", run_backfill), ("streaming", run_streaming)):
                name = f"{ws.run}-{size}-{contender}"
                row = run(ws, name, words, expected)
                row["records_per_s"] = row["records"] / row["seconds"]
                row["cpu_us_per_record"] = row["cpu_s"] / row["records"] * 1e6
                rows.append(row)
                rate, cpu = row["records_per_s"], row["cpu_s"]
                line = f"{size:>9,} {contender:10} {row['seconds']:7.1f}s {rate:9,.0f} rec/s"
                print(f"  {line}, CPU {cpu:.1f}s", flush=True)
    columns = [("contender", -10), ("records", 9), ("seconds", 8), ("in-run s", 9),
               ("records/s", 10), ("CPU us/rec", 11)]  # fmt: skip
    print(common.table(columns, [
        (r["contender"], r["records"], round(r["seconds"], 1),
         None if r["in_run_s"] is None else round(r["in_run_s"], 1),
         round(r["records_per_s"]), round(r["cpu_us_per_record"], 1))
        for r in rows
    ]))  # fmt: skip
    common.write_results("backfill", args, rows=rows)
    return 0 if all(r["outputs"] >= r["records"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
