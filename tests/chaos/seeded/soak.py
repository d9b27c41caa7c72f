"""`make soak`: the windowed pipeline at a steady input rate for LOGWHEEL_SOAK_MINUTES (30 by
default) on a three-broker cluster behind Toxiproxy (`seeded/cluster.py`), with a fault every
few minutes, one broker at a time (in turn: SIGKILL of an instance, SIGKILL of a broker,
SIGSTOP of an instance past the session, a broker stopped past its session, a broker cut off
from the clients, a broker slowed, the controller killed, connection resets during commits),
printing every minute the resident memory and open file descriptors of the job's
processes, the size of their RocksDB stores, the consumer lag and the longest time the output
stood still in that minute. It fails if a figure keeps growing (over the second half of the
run, a figure that rose at every minute and ends more than twice where the half began) or if
a process died by itself. The longest stall is reported, not held to a bound: a fault's own
stall is the seeded chaos run's to bound (`test_seeded_chaos_cluster.py`); here what counts is
that stalls do not grow as the job ages.

`python -m tests.chaos.seeded.soak` runs it by hand (LOGWHEEL_SOAK_RATE events a second).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from framework.broker.readiness import QUIET
from framework.ops.status import status
from tests.chaos.seeded.cluster import ClusterBroker
from tests.chaos.seeded.faults import CLIENT_SETTINGS, FaultInjector, instances_of, write_config
from tests.chaos.seeded.schedule import Fault
from tests.chaos.seeded.workload import EventsFeeder
from tests.chaos.windows_job import BUCKET
from tests.support import UniqueJob
from tests.support_cluster import OutputWatch

FAULTS = (
    Fault(0, "sigkill", 0, 1.0),
    Fault(0, "node-kill", 1, 1.0),
    Fault(0, "sigstop", 1, 6.0),  # past the clients' session of 4 s
    Fault(0, "node-stop", 2, 15.0),  # past the broker session of 9 s
    Fault(0, "proxy-cut", 3, 20.0),
    Fault(0, "latency", 1, 20.0, latency_ms=1_000),
    Fault(0, "controller-kill", 0, 1.0),
    Fault(0, "commit-reset", 2, 0.5),
)
"""The soak's faults in turn (targets: an instance, or a node; see `seeded/cluster.py`)."""


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def sample(instances, pipeline, bootstrap: str) -> dict[str, float]:
    """RSS (MB) and open fds summed over the live processes, the largest process's RSS (MB),
    RocksDB size (kB), lag."""
    rss = top = fds = 0
    for inst in instances:
        proc = inst.job.proc
        if proc is None or proc.poll() is not None:
            continue
        try:
            kb = _rss_kb(proc.pid)
            fds += len(os.listdir(f"/proc/{proc.pid}/fd"))
        except OSError:
            continue
        rss, top = rss + kb, max(top, kb)
    rocks = sum(_size(inst.state_dir) for inst in instances)
    try:
        lag = sum(r.consumer_lag or 0 for r in status(pipeline, bootstrap))
    except Exception:  # noqa: BLE001 - the cluster is busy: no figure this minute
        lag = -1
    return {
        "rss_mb": rss / 1024,
        "rss_top_mb": top / 1024,
        "fds": fds,
        "rocksdb_kb": rocks / 1024,
        "lag": lag,
    }


def unbounded(series: list[float]) -> bool:
    """Rose at every sample of the second half and ended over twice where that half began."""
    half = series[len(series) // 2 :]
    if len(half) < 3 or half[0] <= 0:
        return False
    rising = all(b > a for a, b in zip(half, half[1:], strict=False))
    return rising and half[-1] > 2 * half[0]


def soak(root: Path, minutes: float, rate: int, fault_every: float = 150) -> list[str]:
    """Run the soak; returns what failed it (empty: passed)."""
    instances = []
    broker = ClusterBroker(root / "cluster")
    with contextlib.ExitStack() as stack:
        stack.callback(broker.close)
        bootstrap = broker.start()
        try:
            win = UniqueJob(
                bootstrap, root, "tests.chaos.windows_job:build", "soak", "exactly_once",
                "zeitgeist.SearchQuery",
            )  # fmt: skip
            config = write_config(root / "chaos.toml")
            instances = instances_of(win, 2, bootstrap=bootstrap, root=root, config=config)
            for inst in instances:
                inst.start()
            # The second stage's output: it moves every second, two hops from the input.
            watch = stack.enter_context(OutputWatch(bootstrap, f"{win.prefix}totals"))
            windows = int(minutes * 60) + 30
            base = (int(time.time() * 1000) - 3_600_000) // BUCKET * BUCKET
            feeder = EventsFeeder(
                win.pipeline, bootstrap, base, windows, rate, 1.0, 7,
                {**CLIENT_SETTINGS, "logger": QUIET},  # a broker down is expected
            )  # fmt: skip
            feeder.start()
            injector = FaultInjector(broker, instances, None)
            started, next_fault, n = time.monotonic(), fault_every, 0
            series: dict[str, list[float]] = {}
            for minute in range(1, int(minutes) + 1):
                while time.monotonic() - started < minute * 60:
                    if time.monotonic() - started >= next_fault:
                        injector.do(replace(FAULTS[n % len(FAULTS)], at=next_fault))
                        done = injector.done[-1]
                        print(f"soak fault {n + 1}: {done.fault.kind} {done.note}", flush=True)
                        n, next_fault = n + 1, next_fault + fault_every
                    for inst in instances:
                        inst.check()
                    time.sleep(1)
                figures = sample(instances, win.pipeline, bootstrap)
                now = time.monotonic()
                first = watch.arrivals[0] if watch.arrivals else now
                figures["stall_s"] = watch.stall_since(max(first, now - 60), now)
                for name, value in figures.items():
                    series.setdefault(name, []).append(value)
                shown = "  ".join(f"{k}={v:.1f}" for k, v in figures.items())
                print(f"soak minute {minute}: {shown}  faults={n}", flush=True)
            if feeder.error is not None:
                raise RuntimeError(f"feeder failed: {feeder.error!r}")
            longest = watch.stall_since(watch.arrivals[0]) if watch.arrivals else float("inf")
            crashes = [c for inst in instances for c in inst.crashes]
            grown = [name for name, values in series.items() if unbounded(values)]
            peaks = "  ".join(f"max {k}={max(v):.1f}" for k, v in series.items())
            print(f"soak figures: {peaks}  longest stall {longest:.1f}s", flush=True)
            return grown + [f"crash: {c[:300]}" for c in crashes] + injector.errors
        finally:
            for inst in instances:
                inst.job.stop(timeout=15)


def main() -> int:
    minutes = float(os.environ.get("LOGWHEEL_SOAK_MINUTES", "30"))
    rate = int(os.environ.get("LOGWHEEL_SOAK_RATE", "200"))
    root = Path(tempfile.mkdtemp(prefix="logwheel-soak-"))
    began = time.monotonic()
    try:
        problems = soak(root, minutes, rate)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    took = (time.monotonic() - began) / 60
    if problems:
        print("soak FAILED: " + "; ".join(problems))
        return 1
    print(
        f"soak passed: {minutes:g} minutes at {rate} events/s on three brokers, "
        f"a fault every 150 s, every figure bounded (run time {took:.1f} min)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
