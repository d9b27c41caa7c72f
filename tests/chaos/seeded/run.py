"""One seeded chaos run: a broker of its own (or, in the cluster mode, a cluster of three
behind Toxiproxy: `cluster.py`), wordcount and the windowed pipeline with two instances of
every computation, both inputs fed at a steady rate with malformed records mixed in, the
schedule of faults drawn from the seed, then the verifier.

`python -m tests.chaos.seeded.run [--cluster] --seed N [--full] [--at-least-once]` replays a
run by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from framework.kafka.topic_ends import end_offsets
from framework.ops.status import status
from tests.chaos.seeded.cluster import ClusterBroker
from tests.chaos.seeded.faults import (
    CLIENT_SETTINGS,
    ChaosBroker,
    Done,
    FaultInjector,
    instances_of,
    write_config,
)
from tests.chaos.seeded.schedule import (
    BROKER_KINDS,
    CLUSTER_KINDS,
    CLUSTER_MODE_KINDS,
    KINDS,
    PROCESS_KINDS,
    by_kind,
    draw,
)
from tests.chaos.seeded.verifier import (
    Report,
    open_windows,
    summary,
    verify_windows,
    verify_wordcount,
)
from tests.chaos.seeded.workload import EventsFeeder, LinesFeeder, Malformed, open_input_topics
from tests.chaos.windows_job import BUCKET
from tests.support import UniqueJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Size:
    """How big a run is: input, pace and faults."""

    lines: int
    line_rate: int
    windows: int
    per_window: int
    span: float  # seconds over which the faults are spread
    per_kind: int | dict[str, int]
    kinds: tuple[str, ...] = KINDS
    instances: int = 2
    settle_s: float = 300  # longest wait, once fed, for the pipelines to finish
    commit_interval_ms: int | None = None  # `logwheel run --commit-interval-ms`, if not default
    backlog: bool = False  # the whole input first, then the instances (FaultInjector.on_backlog)
    cluster: bool = False  # three nodes behind Toxiproxy (cluster.py), not one broker
    cut_hold: tuple[float, float] = (5.0, 60.0)  # how long a proxy cut lasts
    targets: tuple[str, ...] = ()  # the computations whose instances process faults hit (all)

    def count(self, kind: str) -> int:
        """How many faults of `kind` the run draws."""
        return self.per_kind[kind] if isinstance(self.per_kind, dict) else self.per_kind


FULL_RUN = os.environ.get("LOGWHEEL_CHAOS_FULL") == "1"
"""`make chaos`: the full size; `make test` runs the reduced one."""
SEED = int(os.environ.get("LOGWHEEL_CHAOS_SEED", "20261123"))
"""The seed `make test` replays; LOGWHEEL_CHAOS_SEED replays another."""

REDUCED = Size(
    lines=12_000, line_rate=300, windows=40, per_window=140, span=40,
    per_kind={**dict.fromkeys(PROCESS_KINDS, 4), **dict.fromkeys(BROKER_KINDS, 2)},
)  # fmt: skip
"""`make test`'s single broker: 40 s of input, four of each process fault, two of each
broker fault (three until issues 39-43's tests needed `make test`'s time: a restart takes
14-20 s, and the broker lane would outlast a longer list). The input took twice its 40 s
under the broker faults; `make chaos` runs `FULL`."""
FULL = Size(
    lines=820_000, line_rate=1_400, windows=600, per_window=320, span=560, per_kind=10,
    settle_s=1200,
)  # fmt: skip


CLUSTER_REDUCED = Size(
    lines=15_000, line_rate=250, windows=60, per_window=140, span=60, cluster=True,
    per_kind={**dict.fromkeys(PROCESS_KINDS, 2), **dict.fromkeys(CLUSTER_KINDS, 1)},
    kinds=CLUSTER_MODE_KINDS, cut_hold=(5.0, 12.0),
)  # fmt: skip
"""`make test`'s cluster mode: a minute of input, two of each process fault, one of each broker
and network kind (the broker lane, one fault at a time until the cluster is whole, takes about
90 s for the six)."""
CLUSTER_FULL = Size(
    lines=820_000, line_rate=1_200, windows=700, per_window=320, span=680, cluster=True,
    per_kind=5, kinds=CLUSTER_MODE_KINDS, settle_s=1200,
)  # fmt: skip
"""`make chaos`'s cluster mode: 1,000,000+ records, five faults of each of ten kinds."""


@dataclass
class Outcome:
    seed: int
    report: Report
    faults: list[Done]
    stall: float
    line: str
    crashes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    hanging: list[str] = field(default_factory=list)  # find-hanging's rows (cluster mode)


class OutputSampler(threading.Thread):
    """Committed end offsets of every output topic, summed, every half second: when output
    moved again after each fault. A partition whose leader does not answer (its broker down,
    or cut off from the clients) keeps its last figure, so the others' progress still shows."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        super().__init__(daemon=True, name="output-sampler")
        self.bootstrap = bootstrap
        self.topics = topics
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def offsets(self) -> dict[tuple[str, int], int]:
        """The end offset of every output partition that answered. A fresh admin client each
        time: one kept across broker restarts was seen to stop answering for good. One request
        per leader, so a leader that does not answer fails only its own partitions."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000})
        try:
            meta = admin.list_topics(timeout=5).topics
            by_leader: dict[int, dict] = defaultdict(dict)
            for t in self.topics:
                for p, partition in meta[t].partitions.items():
                    by_leader[partition.leader][TopicPartition(t, p)] = OffsetSpec.latest()
            futures = {}
            for wanted in by_leader.values():
                futures |= admin.list_offsets(
                    wanted, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=5
                )
        except Exception:  # noqa: BLE001 - no broker answers: no figure
            return {}
        got = {}
        for tp, future in futures.items():
            with contextlib.suppress(Exception):  # its leader does not answer
                got[(tp.topic, tp.partition)] = future.result(10).offset
        return got

    def run(self) -> None:
        known: dict[tuple[str, int], int] = {}
        while not self.stop.wait(0.5):
            got = self.offsets()
            if got:
                for tp, offset in got.items():
                    known[tp] = max(offset, known.get(tp, offset))
                self.samples.append((time.monotonic(), sum(known.values())))

    def stall_after(self, t: float) -> float | None:
        """How long after `t` output moved on (None: no sample before `t`, or never moved)."""
        before = [n for s, n in self.samples if s <= t]
        if not before:
            return None
        moved = next((s for s, n in self.samples if s > t and n > before[-1]), None)
        return None if moved is None else moved - t

    def longest_stall(
        self,
        times: list[float],
        until: float,
        excused: Callable[[float, float], float] | None = None,
    ) -> float:
        """The longest wait, over faults before `until`, from a fault to output moving on,
        less what `excused(start, end)` says of each wait (the cluster mode: the time a node
        was cut off from the clients, `ClusterBroker.cut_off`)."""
        stalls = [(t, self.stall_after(t)) for t in times if t <= until]
        waits = [s - (excused(t, t + s) if excused else 0.0) for t, s in stalls if s is not None]
        return max(waits, default=0.0)

    def gaps(self, longer_than: float = 5.0) -> list[tuple[float, float]]:
        """Stretches (start, length) without a sample: the broker did not answer."""
        times = [s for s, _ in self.samples]
        return [(a, b - a) for a, b in zip(times, times[1:], strict=False) if b - a > longer_than]


def assert_passed(outcome: Outcome, size: Size, records: int) -> None:
    """What every seeded run must show: every fault done, no process that died by itself,
    every kind drawn as often as `size` says, `records` at least, and nothing lost,
    duplicated or wrong (a cluster run: no hanging transaction either)."""
    print(outcome.line)
    report = outcome.report
    details = "\n".join(report.unchecked + report.details + outcome.errors + outcome.crashes)
    assert not outcome.errors, f"faults that could not be done:\n{details}"
    assert not outcome.crashes, f"processes that died by themselves:\n{details}"
    faults = by_kind([d.fault for d in outcome.faults])
    assert all(faults.get(kind, 0) >= size.count(kind) for kind in size.kinds), faults
    assert report.records >= records
    assert report.ok, f"{outcome.line}\n{details}"
    assert not outcome.hanging, "\n".join(outcome.hanging)


def write_timeline(path: Path, injector: FaultInjector, sampler: OutputSampler) -> None:
    """Every fault (seconds from the start, kind, target, hold, how long it took, what it met)
    with the wait until output moved on after it, and the sampler's gaps (the broker did not
    answer): where a long stall came from."""
    lines = []
    for done in sorted(injector.done, key=lambda d: d.began):
        stall = sampler.stall_after(injector.started + done.began)
        shown = "never" if stall is None else f"{stall:.1f}s"
        f = done.fault
        lines.append(
            f"{done.began:8.1f} {f.kind:<12} target={f.target} hold={f.hold} "
            f"took={done.ended - done.began:.1f}s {done.note} output moved after {shown}"
        )
    for start, length in sampler.gaps():
        lines.append(f"{start - injector.started:8.1f} no sample for {length:.1f}s")
    path.write_text("\n".join(sorted(lines, key=lambda line: float(line.split()[0]))) + "\n")


def run_chaos(root: Path, seed: int, size: Size, guarantee: str = "exactly_once") -> Outcome:
    began = time.monotonic()
    broker = ClusterBroker(root / "cluster") if size.cluster else ChaosBroker(root / "broker")
    bootstrap = broker.start()
    instances, sampler = [], None
    try:
        wc = UniqueJob(bootstrap, root, "jobs.wordcount:build", "wc", guarantee)
        win = UniqueJob(
            bootstrap, root, "tests.chaos.windows_job:build", "win", guarantee,
            "zeitgeist.SearchQuery",
        )  # fmt: skip
        open_input_topics(bootstrap, [f"{wc.prefix}lines", f"{win.prefix}events"])
        config = write_config(root / "chaos.toml")
        every = size.commit_interval_ms
        args = () if every is None else ("--commit-interval-ms", str(every))
        for unique in (wc, win):
            instances += instances_of(
                unique, size.instances, bootstrap=bootstrap, root=root, config=config, args=args
            )
        outputs = [f"{wc.prefix}word-counts"]
        outputs += [f"{win.prefix}{s}" for s in ("counts", "totals", "rollups")]
        sampler = OutputSampler(bootstrap, outputs)
        sampler.start()
        base = (int(time.time() * 1000) - 3_600_000) // BUCKET * BUCKET
        lines = LinesFeeder(bootstrap, f"{wc.prefix}lines", size.lines, size.line_rate, seed)
        interval = size.lines / size.line_rate / size.windows
        events = EventsFeeder(
            win.pipeline, bootstrap, base, size.windows, size.per_window, interval, seed,
            dict(CLIENT_SETTINGS),
        )  # fmt: skip
        malformed = Malformed(bootstrap, f"{wc.prefix}lines", f"{win.prefix}events", seed)
        # The process faults' targets: the instances (named `<computation>-<n>`) of
        # `size.targets`, or all.
        targets = [i for i in instances if i.name.rsplit("-", 1)[0] in size.targets] or instances
        faults = draw(
            seed, size.span, size.per_kind, len(targets), kinds=size.kinds,
            cut_hold=size.cut_hold,
        )  # fmt: skip
        print(f"chaos seed={seed}: {len(faults)} faults over {size.span:.0f}s, "
              f"{len(instances)} instances, logs in {root / 'logs'}", flush=True)  # fmt: skip
        _start_work(size, instances, [lines, events])
        injector = FaultInjector(broker, targets, malformed, on_backlog=size.backlog)
        injector.run(faults)
        lines.join()
        events.join()
        malformed.flush()
        fed = time.monotonic()
        for feeder in (lines, events):
            if feeder.error is not None:
                raise RuntimeError(f"{feeder.name} failed: {feeder.error!r}")
        # Settled: every group committed the end of its input and no window is left open.
        deadline = time.monotonic() + size.settle_s
        while time.monotonic() < deadline:
            for inst in instances:
                inst.check()
            if _settled(wc, win, bootstrap):
                break
            time.sleep(1)
        report = Report()
        verify_wordcount(report, bootstrap, wc.name, wc.prefix)
        verify_windows(report, bootstrap, win.name, win.prefix)
        times = [injector.started + d.began for d in injector.done]
        hanging, with_cuts = None, None
        if size.cluster:  # only faults that met two nodes or more up and reachable
            times = [t for t in times if broker.up_at(t) >= 2]
            hanging = broker.find_hanging()
            with_cuts = sampler.longest_stall(times, fed)
        stall = sampler.longest_stall(times, fed, broker.cut_off if size.cluster else None)
        write_timeline(root / "timeline.txt", injector, sampler)
        kinds = by_kind([d.fault for d in injector.done])
        outcome = Outcome(
            seed,
            report,
            injector.done,
            stall,
            summary(seed, report, kinds, stall, hanging, with_cuts),
            [c for inst in instances for c in inst.crashes],
            injector.errors,
            hanging=hanging or [],
        )
    finally:
        if sampler is not None:
            sampler.stop.set()
        _stop_all(instances)
        broker.close()
    outcome.seconds = time.monotonic() - began
    return outcome


def _stop_all(instances: list) -> None:
    """Stop every instance (SIGCONT first, in case), side by side: one after the other, their
    clean shutdowns took 0.2 to 1.2 s each, 4 to 5 s for the run's ten."""
    for inst in instances:
        inst.job.signal(18) if inst.job.alive() else None  # SIGCONT, in case
    threads = [threading.Thread(target=i.job.stop, kwargs={"timeout": 15}) for i in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _start_work(size: Size, instances: list, feeders: list[threading.Thread]) -> None:
    """Start the instances and the feeders together (the input arrives while they work), or,
    with `size.backlog`, the whole input first and then the instances, which start with a
    backlog to work off."""
    if size.backlog:
        for feeder in feeders:
            feeder.start()
        for feeder in feeders:
            feeder.join()
    for inst in instances:
        inst.start()
    if not size.backlog:
        for feeder in feeders:
            feeder.start()


def _settled(wc: UniqueJob, win: UniqueJob, bootstrap: str) -> bool:
    """Nothing left to do: every group of both pipelines committed the end of its input, and
    no windowed stage holds a window open (one would fire a timer, whose output the next stage
    then reads). Waiting for the output to go quiet had cost seconds of silence per run."""
    try:
        rows = [row for p in (wc.pipeline, win.pipeline) for row in status(p, bootstrap)]
        if any(row.consumer_lag not in (0, None) for row in rows):
            return False
        # no commit yet is not "nothing to read": an instance SIGKILLed before its first
        # commit, and restarted, left its group none while it worked off the whole backlog
        # (the at-least-once run was once checked then, 33,618 counts "lost")
        uncommitted = {(r.topic, r.partition) for r in rows if r.consumer_lag is None}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        if any(end_offsets(admin, uncommitted, committed=True).values()):
            return False
        return not any(
            open_windows(bootstrap, f"{win.name}.{computation}.changelog")
            for computation in win.pipeline.computations
        )
    except Exception:  # noqa: BLE001 - the broker is busy: not yet
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--cluster", action="store_true", help="three nodes behind Toxiproxy")
    parser.add_argument("--at-least-once", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="logwheel-chaos-"))
    guarantee = "at_least_once" if args.at_least_once else "exactly_once"
    try:
        sizes = {False: (REDUCED, FULL), True: (CLUSTER_REDUCED, CLUSTER_FULL)}[args.cluster]
        outcome = run_chaos(root, args.seed, sizes[args.full], guarantee)
        print(outcome.line)
        found = outcome.report.unchecked + outcome.report.details
        for line in found + outcome.crashes + outcome.errors + outcome.hanging:
            print("  " + line[:400])
        print(f"run time {outcome.seconds:.0f}s")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
