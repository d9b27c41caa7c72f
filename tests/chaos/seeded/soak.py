"""`make soak`: the windowed pipeline at a steady input rate for LOGWHEEL_SOAK_MINUTES (30 by
default) with a fault every few minutes (SIGKILL, SIGSTOP past the session, a broker restart,
in turn), printing every minute the resident memory and open file descriptors of the job's
processes, the size of their RocksDB stores and the consumer lag; it fails if any of them
keeps growing: over the second half of the run, a figure that rose at every minute and ends
more than twice where the half began.

`python -m tests.chaos.seeded.soak` runs it by hand (LOGWHEEL_SOAK_RATE events a second).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from framework.ops.status import status
from tests.chaos.seeded.faults import (
    CLIENT_SETTINGS,
    ChaosBroker,
    FaultInjector,
    instances_of,
    write_config,
)
from tests.chaos.seeded.schedule import Fault
from tests.chaos.seeded.workload import EventsFeeder
from tests.chaos.windows_job import BUCKET
from tests.support import UniqueJob

FAULTS = ("sigkill", "sigstop", "broker-stop", "sigkill", "broker-kill")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def sample(instances, pipeline, bootstrap: str) -> dict[str, float]:
    """RSS (MB) and open fds summed over the live processes, RocksDB size (MB), lag."""
    rss = fds = 0
    for inst in instances:
        proc = inst.job.proc
        if proc is None or proc.poll() is not None:
            continue
        try:
            rss += _rss_kb(proc.pid)
            fds += len(os.listdir(f"/proc/{proc.pid}/fd"))
        except OSError:
            continue
    rocks = sum(_size(inst.state_dir) for inst in instances)
    try:
        lag = sum(r.consumer_lag or 0 for r in status(pipeline, bootstrap))
    except Exception:  # noqa: BLE001 - the broker is restarting: no figure this minute
        lag = -1
    return {"rss_mb": rss / 1024, "fds": fds, "rocksdb_mb": rocks / 2**20, "lag": lag}


def unbounded(series: list[float]) -> bool:
    """Rose at every sample of the second half and ended over twice where that half began."""
    half = series[len(series) // 2 :]
    if len(half) < 3 or half[0] <= 0:
        return False
    rising = all(b > a for a, b in zip(half, half[1:], strict=False))
    return rising and half[-1] > 2 * half[0]


def soak(root: Path, minutes: float, rate: int, fault_every: float = 150) -> list[str]:
    """Run the soak; returns the figures that grew without bound (empty: passed)."""
    broker = ChaosBroker(root / "broker")
    bootstrap = broker.start()
    instances = []
    feeder = None
    try:
        win = UniqueJob(
            bootstrap, root, "tests.chaos.windows_job:build", "soak", "exactly_once",
            "zeitgeist.SearchQuery",
        )  # fmt: skip
        config = write_config(root / "chaos.toml")
        instances = instances_of(win, 2, bootstrap=bootstrap, root=root, config=config)
        for inst in instances:
            inst.start()
        windows = int(minutes * 60) + 30
        base = (int(time.time() * 1000) - 3_600_000) // BUCKET * BUCKET
        feeder = EventsFeeder(
            win.pipeline, bootstrap, base, windows, rate, 1.0, 7, dict(CLIENT_SETTINGS)
        )
        feeder.start()
        injector = FaultInjector(broker, instances, None)
        started, next_fault, n = time.monotonic(), fault_every, 0
        series: dict[str, list[float]] = {}
        for minute in range(1, int(minutes) + 1):
            while time.monotonic() - started < minute * 60:
                if time.monotonic() - started >= next_fault:
                    kind = FAULTS[n % len(FAULTS)]
                    target = n % len(instances)
                    hold = 6.0 if kind == "sigstop" else 1.0
                    injector.do(Fault(next_fault, kind, target, hold))
                    n, next_fault = n + 1, next_fault + fault_every
                for inst in instances:
                    inst.check()
                time.sleep(1)
            figures = sample(instances, win.pipeline, bootstrap)
            for name, value in figures.items():
                series.setdefault(name, []).append(value)
            shown = "  ".join(f"{k}={v:.1f}" for k, v in figures.items())
            print(f"soak minute {minute}: {shown}  faults={n}", flush=True)
        if feeder.error is not None:
            raise RuntimeError(f"feeder failed: {feeder.error!r}")
        crashes = [c for inst in instances for c in inst.crashes]
        grown = [name for name, values in series.items() if unbounded(values)]
        return grown + [f"crash: {c[:300]}" for c in crashes] + injector.errors
    finally:
        for inst in instances:
            inst.job.stop(timeout=15)
        broker.close()


def main() -> int:
    minutes = float(os.environ.get("LOGWHEEL_SOAK_MINUTES", "30"))
    rate = int(os.environ.get("LOGWHEEL_SOAK_RATE", "200"))
    root = Path(tempfile.mkdtemp(prefix="logwheel-soak-"))
    try:
        problems = soak(root, minutes, rate)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if problems:
        print("soak FAILED: " + "; ".join(problems))
        return 1
    print(f"soak passed: {minutes:g} minutes at {rate} events/s, every figure bounded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
