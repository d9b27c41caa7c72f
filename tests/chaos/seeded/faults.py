"""The faults of the seeded chaos run, done for real: a broker of the run's own (its own home
and port, so stopping it never disturbs another test; its KRaft controller in a JVM of its own
that the broker faults leave running) and `logwheel run` processes, one per computation
instance, each with a stable `--instance-id` (so a wiped disk is still the same static member)
and short session timeouts from `[kafka]` in `--config`.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from framework.broker.embedded import Broker
from tests.chaos.seeded.schedule import CLUSTER_KINDS, LANE_KINDS, Fault
from tests.support import TRANSACTIONS_LOG4J, Job

log = logging.getLogger(__name__)

BROKER_SETTINGS = {
    # A killed broker's registration is fenced in 4 s instead of 9, so it restarts in seconds.
    # Not 2 s: under make test's load a live broker, 16 s after a restart, went 2 s without a
    # heartbeat reaching its controller and was fenced, then unfenced 0.65 s later; Kafka's
    # group coordinator for one __consumer_offsets partition never answered again (every
    # OffsetFetch of split-words' group timed out for the last 6 minutes of the run).
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    # Sessions of a few seconds, so a SIGSTOPped member loses its partitions quickly.
    "group.min.session.timeout.ms": "1000",
}
CLIENT_SETTINGS = {
    "session.timeout.ms": 4000,
    "heartbeat.interval.ms": 500,
    "reconnect.backoff.max.ms": 1000,
}
SESSION_S = CLIENT_SETTINGS["session.timeout.ms"] / 1000


class ChaosBroker:
    """The run's own embedded broker, restarted on the same port after every fault.

    Its controller runs in a JVM of its own (`Broker(separate_controller=True)`), which the
    broker faults never touch, as a production controller quorum outlives a broker's crash:
    with one combined JVM, a restarted node acted on the metadata it replayed before the
    controller in it fenced its previous incarnation, and its partitions had no leader for a
    moment while its transaction coordinator sent markers (docs/chaos.md). The
    broker and controller log what explains a hanging transaction (`TRANSACTIONS_LOG4J`)."""

    def __init__(self, home: Path) -> None:
        self.broker = Broker(
            home,
            settings=BROKER_SETTINGS,
            jvm_opts=["-XX:TieredStopAtLevel=1", TRANSACTIONS_LOG4J],
            separate_controller=True,
        )
        self.bootstrap = ""
        self.port = 0

    def start(self) -> str:
        for attempt in range(10):
            try:
                started = self.broker.start(port=self.port, say=lambda _: None)
                break
            except Exception as error:  # noqa: BLE001 - the port may linger a moment
                if attempt == 9:
                    raise
                log.warning("broker start: %s; trying again", error)
                time.sleep(1)
        self.bootstrap = started.address
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self.bootstrap

    def stop(self) -> None:
        """The broker-stop fault: SIGTERM the broker; the controller stays up."""
        self.broker.stop(keep_controller=True)

    def close(self) -> None:
        """The end of the run: stop the broker and its controller."""
        self.broker.stop()

    def kill(self) -> None:
        """The broker-kill fault: SIGKILL the broker; the controller stays up."""
        self.broker.kill()


@dataclass
class Instance:
    """One `logwheel run --computation NAME` process of a pipeline, on its own state dir."""

    name: str
    job: Job
    state_dir: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    starts: int = 0
    transactional_id: str = ""  # `<pipeline>.<computation>.<instance id>` (exactly-once)
    crashes: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.starts += 1
        self.job.start()

    def check(self) -> None:
        """A process that ended without being killed is a crash: remember it, start again."""
        proc = self.job.proc
        if proc is not None and proc.poll() is not None and proc.returncode != -signal.SIGKILL:
            tail = self.job.output(this_start=True)[-1500:]
            self.crashes.append(f"{self.name} exited {proc.returncode}: {tail}")
            self.start()


def instance(
    ref: str,
    computation: str,
    n: int,
    *,
    bootstrap: str,
    root: Path,
    path: Path,
    config: Path,
    args: tuple[str, ...] = (),
) -> Instance:
    name = f"{computation}-{n}"
    state = root / f"state-{ref.split(':')[0]}-{name}"
    job = Job(
        ref,
        bootstrap=bootstrap,
        state_dir=state,
        path=path,
        computations=[computation],
        log=root / "logs" / f"{ref.split(':')[0]}-{name}.log",
    )
    job.args += ["--instance-id", name, "--config", str(config), *args]
    return Instance(name, job, state)


def instances_of(
    unique,
    per_computation: int,
    *,
    bootstrap: str,
    root: Path,
    config: Path,
    args: tuple[str, ...] = (),
) -> list[Instance]:
    """`per_computation` instances of every computation of a `tests.support.UniqueJob`, each
    run with `args` added to its `logwheel run` command line."""
    made = []
    for computation in unique.pipeline.computations:
        for n in range(per_computation):
            inst = instance(
                f"{unique.module}:pipeline", computation, n, bootstrap=bootstrap, root=root,
                path=root, config=config, args=args,
            )  # fmt: skip
            inst.transactional_id = f"{unique.pipeline.name}.{computation}.{inst.name}"
            made.append(inst)
    return made


def write_config(path: Path) -> Path:
    lines = ["[kafka]", *(f'"{k}" = {v}' for k, v in CLIENT_SETTINGS.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Done:
    """A fault as it happened: when (s from the start), what, and what it met."""

    fault: Fault
    began: float
    ended: float
    note: str = ""


class FaultInjector:
    """Runs a schedule: broker faults one after another on their own lane, each process fault
    on a thread of its own (one fault at a time per instance), at their times. The cluster
    mode's kinds are done by the broker object (`ClusterBroker.inflict`, in `cluster.py`).

    `on_backlog`: the instances start with a backlog to work off, and a SIGKILL waits until its
    target has taken its partitions, lets it work `hold` s of CPU (on a loaded machine that
    takes longer than `hold` s of wall time, and a kill after a fixed wall time could land
    before the target delivered anything), kills it and starts it again at once (so the kill
    lands while it works the backlog off); otherwise a SIGKILL kills at once and `hold` is the
    time down."""

    def __init__(
        self, broker: ChaosBroker, instances: list[Instance], malformed, on_backlog: bool = False
    ) -> None:
        self.broker, self.instances, self.malformed = broker, instances, malformed
        self.on_backlog = on_backlog
        self.done: list[Done] = []
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def now(self) -> float:
        return time.monotonic() - self.started

    def run(self, faults: list[Fault]) -> None:
        broker_lane = [f for f in faults if f.kind in LANE_KINDS]
        lane = threading.Thread(target=self._broker_lane, args=(broker_lane,), daemon=True)
        lane.start()
        for fault in (f for f in faults if f.kind not in LANE_KINDS):
            self._sleep_until(fault.at)
            thread = threading.Thread(target=self.do, args=(fault,), daemon=True)
            thread.start()
            self._threads.append(thread)
        lane.join()
        for thread in self._threads:
            thread.join()

    def _sleep_until(self, at: float) -> None:
        time.sleep(max(0.0, at - self.now()))

    def _broker_lane(self, faults: list[Fault]) -> None:
        for fault in faults:
            self._sleep_until(fault.at)
            self.do(fault)

    def do(self, fault: Fault) -> None:
        began = self.now()
        try:
            note = self._do(fault)
        except Exception as error:  # noqa: BLE001 - a fault that could not be done fails the run
            note = f"failed: {error!r}"
            self.errors.append(f"{fault}: {error!r}")
        with self._lock:
            self.done.append(Done(fault, began, self.now(), note))

    def _do(self, fault: Fault) -> str:
        kind = fault.kind
        if kind == "malformed":
            return f"{self.malformed.inject()} records"
        if kind in CLUSTER_KINDS:
            return self.broker.inflict(fault, self.instances)
        if kind == "broker-stop":
            self.broker.stop()
            time.sleep(fault.hold)
            self.broker.start()
            return ""
        if kind == "broker-kill":
            self.broker.kill()
            time.sleep(fault.hold)
            self.broker.start()
            return ""
        target = self.instances[fault.target]
        with target.lock:
            target.check()
            if kind == "sigkill" and self.on_backlog:
                working = _wait_working(target)
                _let_work(target, fault.hold)
                target.job.kill()
                target.start()
                return f"{target.name} {'after' if working else 'before'} taking its partitions"
            if kind == "sigkill":
                target.job.kill()
                time.sleep(fault.hold)
                target.start()
                return target.name
            if kind == "sigstop":
                target.job.signal(signal.SIGSTOP)
                time.sleep(fault.hold)
                target.job.signal(signal.SIGCONT)
                return target.name
            if kind == "wipe-state":
                return self._wipe(target, fault.hold)
        raise ValueError(f"unknown fault kind {kind!r}")

    def _wipe(self, target: Instance, hold: float) -> str:
        """Kill, delete the state dir, start; then SIGKILL it again while it restores (after
        it took its partitions, before it logged the end of its restore) and start it."""
        target.job.kill()
        shutil.rmtree(target.state_dir, ignore_errors=True)
        time.sleep(hold)
        target.start()
        _wait_working(target)
        restoring = "restored" not in target.job.output(this_start=True)
        target.job.kill()
        target.start()
        return f"{target.name} {'killed restoring' if restoring else 'killed after restore'}"


def _let_work(target: Instance, cpu_seconds: float, timeout: float = 30) -> None:
    """Wait until `target`'s processes have used `cpu_seconds` more of CPU (or `timeout`)."""
    pid = target.job.proc.pid
    start, deadline = _tree_cpu(pid), time.monotonic() + timeout
    while time.monotonic() < deadline and target.job.alive():
        if _tree_cpu(pid) - start >= cpu_seconds:
            return
        time.sleep(0.02)


def _tree_cpu(pid: int) -> float:
    """CPU seconds used so far by `pid` and its descendants (Linux /proc)."""
    tick, total, stack = os.sysconf("SC_CLK_TCK"), 0.0, [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):  # it ended meanwhile
            continue
    return total


def _wait_working(target: Instance, timeout: float = 30) -> bool:
    """Wait until this incarnation of `target` took its partitions (it logs "assigned")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and target.job.alive():
        if "assigned" in target.job.output(this_start=True):
            return True
        time.sleep(0.02)
    return False
