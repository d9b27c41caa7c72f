"""The seeded chaos run's cluster mode: a three-node KRaft cluster of the run's own (replication
factor 3, `min.insync.replicas` 2) behind Toxiproxy, every client reaching node I only through
the proxy `node-I`, and its broker and network faults done for real.

`ClusterBroker` stands where the single-broker run has its `ChaosBroker`: `FaultInjector(broker,
instances, malformed)` hands it every kind of `CLUSTER_KINDS` (`inflict`), one at a time on
the broker lane, and each ends only once the cluster is whole again (every node up, no
under-replicated partition), so at least two nodes are always up and reachable:

- `node-kill`: SIGKILL node `target`, start it again after `hold` s;
- `node-stop`: SIGTERM (a controlled shutdown) node `target` for `hold` s, past the broker
  session timeout, then start it;
- `controller-kill`: SIGKILL the active KRaft controller (found when the fault comes), then
  start it after `hold` s;
- `proxy-cut`: the proxy of node `target` closes its connections and refuses new ones for
  `hold` s (the node keeps replicating: the brokers talk to each other directly);
- `latency`: `latency_ms` of latency in both directions on node `target`'s proxy for `hold` s;
- `commit-reset`: for `hold` s (under a second) the proxy of the node whose transaction
  coordinator serves instance `target`'s transactional id resets every connection that sends
  or receives (Toxiproxy `reset_peer`): its commits meet connection resets.

It keeps when each node was out (`outages`), so the run measures the output's stalls only over
faults that met at least two nodes up and reachable (`up_at`), less the time a node was cut off
from the clients (`cut_off`), and asks every node for hanging transactions at the end
(`find_hanging`: Kafka's `kafka-transactions.sh find-hanging`).

Another run (the soak) uses it so: `broker = ClusterBroker(home)`, `bootstrap = broker.start()`,
instances from `faults.instances_of` (which gives each its transactional id), then
`FaultInjector(broker, instances, None).do(Fault(at, kind, target, hold))` for any kind above
(`latency_ms=` for latency), and `broker.close()` at the end.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from framework.jvm.jars import kafka_tools_classpath
from framework.jvm.process import find_java
from tests.chaos.seeded.faults import Instance
from tests.chaos.seeded.schedule import Fault
from tests.support_cluster import running_cluster

CLUSTER_SETTINGS = {
    # The clients' sessions of 4 s (faults.CLIENT_SETTINGS), so a SIGSTOPped member loses its
    # partitions quickly; Kafka's broker session timeout (9 s) stays its default.
    "group.min.session.timeout.ms": "1000",
}
WHOLE_TIMEOUT_S = 240.0
"""How long a fault waits for the cluster to be whole again before the run calls it a
failure (a node that does not come back, replicas that do not catch up)."""
HANGING_AFTER_MIN = 1
"""`find-hanging --max-transaction-timeout`: transactions open longer than a minute (logwheel's
transaction timeout is 10 s) that no coordinator knows as ongoing."""
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


@dataclass
class Outage:
    """Node `node` down or cut off from the clients from `began` to `ended` (monotonic s)."""

    node: int
    kind: str
    began: float
    ended: float | None = None


class ClusterBroker:
    """The run's cluster and its proxies (see the module doc). `start()` once, `close()` at
    the end; `bootstrap` is the proxies' addresses."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.bootstrap = ""
        self.cluster = None
        self.proxy = None
        self.outages: list[Outage] = []
        self._stack = contextlib.ExitStack()

    def start(self) -> str:
        running = running_cluster(self.home, proxied=True, settings=CLUSTER_SETTINGS)
        self.cluster, self.proxy = self._stack.enter_context(running)
        self.bootstrap = self.cluster.bootstrap()
        return self.bootstrap

    def close(self) -> None:
        self._stack.close()

    # -- faults ---------------------------------------------------------------------------

    def inflict(self, fault: Fault, instances: list[Instance]) -> str:
        """Do one cluster fault, then wait until the cluster is whole again; what it met."""
        kind, hold = fault.kind, fault.hold
        if kind == "controller-kill":
            node = self._controller()
            note = f"node {node} (the active controller)"
            self._down(node, kind, hold, lambda: self.cluster.kill(node))
        elif kind == "node-kill":
            node, note = fault.target, f"node {fault.target}"
            self._down(node, kind, hold, lambda: self.cluster.kill(node))
        elif kind == "node-stop":
            node, note = fault.target, f"node {fault.target} (SIGTERM)"
            self._down(node, kind, hold, lambda: self.cluster.stop(node=node))
        elif kind == "proxy-cut":
            node, note = fault.target, f"node-{fault.target} cut"
            with self._out(node, kind):
                self.proxy.cut(f"node-{node}")
                time.sleep(hold)
                self.proxy.restore(f"node-{node}")
        elif kind == "latency":
            node, note = fault.target, f"node-{fault.target} +{fault.latency_ms} ms"
            self._toxic(node, hold, "latency", latency=fault.latency_ms)
        elif kind == "commit-reset":
            inst = instances[fault.target]
            node = self.cluster.transaction_coordinator(inst.transactional_id)
            note = f"node-{node} reset_peer (transaction coordinator of {inst.name})"
            with self._out(node, kind):
                self._toxic(node, hold, "reset_peer", timeout=0)
        else:
            raise ValueError(f"unknown cluster fault kind {kind!r}")
        return f"{note}; whole again after {self.wait_whole():.1f}s"

    def _controller(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.cluster.controller()
            if node is not None:
                return node
            time.sleep(0.5)
        raise RuntimeError(f"no active controller known within {timeout:.0f}s")

    def _down(self, node: int, kind: str, hold: float, act) -> None:
        """Take `node` down with `act`, wait `hold` s, start it again (once more if its start
        fails: a port may linger a moment)."""
        with self._out(node, kind):
            act()
            time.sleep(hold)
            for attempt in range(3):
                try:
                    self.cluster.start(node=node, say=lambda _: None)
                    break
                except Exception:  # noqa: BLE001 - the last attempt's error fails the fault
                    if attempt == 2:
                        raise
                    time.sleep(2)

    def _toxic(self, node: int, hold: float, kind: str, **attributes: int) -> None:
        """Toxic `kind` in both directions of node `node`'s proxy for `hold` s."""
        proxy = f"node-{node}"
        names = [
            self.proxy.add_toxic(proxy, kind, s, **attributes) for s in ("upstream", "downstream")
        ]
        try:
            time.sleep(hold)
        finally:
            for name in names:
                self.proxy.remove_toxic(proxy, name)

    @contextlib.contextmanager
    def _out(self, node: int, kind: str):
        outage = Outage(node, kind, time.monotonic())
        self.outages.append(outage)
        try:
            yield
        finally:
            outage.ended = time.monotonic()

    # -- what the run asks ----------------------------------------------------------------

    def whole(self) -> bool:
        """Every node up and no partition missing a replica."""
        if not all(self.cluster.pids().values()):
            return False
        try:
            return not self.cluster.under_replicated()
        except Exception:  # noqa: BLE001 - a node answers no metadata yet
            return False

    def wait_whole(self, timeout: float = WHOLE_TIMEOUT_S) -> float:
        """Wait until the cluster is whole; the seconds waited."""
        began = time.monotonic()
        while not self.whole():
            if time.monotonic() - began > timeout:
                down = [i for i, pid in self.cluster.pids().items() if pid is None]
                raise RuntimeError(f"cluster not whole after {timeout:.0f}s (down: {down})")
            time.sleep(1)
        return time.monotonic() - began

    def up_at(self, t: float) -> int:
        """How many nodes were up and reachable by the clients at monotonic time `t`."""
        out = {o.node for o in self.outages if o.began <= t and (o.ended is None or t < o.ended)}
        return len(self.cluster.nodes) - len(out)

    def cut_off(self, start: float, end: float) -> float:
        """Seconds of [`start`, `end`] (monotonic) during which a node was cut off from the
        clients by its proxy. Its peers still reach it, so it stays the leader of its
        partitions and nothing fails over: every transaction that writes to one of them
        waits for the cut to end (a stall the cluster cannot shorten, left out of the bound)."""
        cuts = [o for o in self.outages if o.kind == "proxy-cut"]
        spans = [(max(start, o.began), min(end, o.ended or end)) for o in cuts]
        return sum(b - a for a, b in spans if b > a)

    def find_hanging(self) -> list[str]:
        """Kafka's `kafka-transactions.sh find-hanging` against every node: a row for each
        transaction open past the timeout that its coordinator does not know as ongoing. The
        three tools run side by side (one JVM each: one after the other took 10 to 20 s)."""
        java, classpath = find_java("Kafka"), kafka_tools_classpath()

        def ask(node: int) -> list[str]:
            command = [java, "-Xmx128m", "-cp", classpath, TRANSACTIONS_COMMAND]
            command += ["--bootstrap-server", self.bootstrap, "find-hanging"]
            command += ["--broker-id", str(node), "--max-transaction-timeout"]
            command += [str(HANGING_AFTER_MIN)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=180)
            if done.returncode != 0:
                raise RuntimeError(f"find-hanging on node {node}: {done.stderr[-500:]}")
            return [f"node {node}: {row}" for row in hanging_rows(done.stdout)]

        nodes = sorted(self.cluster.nodes)
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            return [row for rows in pool.map(ask, nodes) for row in rows]


def hanging_rows(output: str) -> list[str]:
    """The transactions `find-hanging` printed: the rows of its tab-separated table (Topic,
    Partition, ProducerId, ProducerEpoch, CoordinatorEpoch, StartOffset, LastTimestamp,
    Duration(min)) after the header, which it prints alone when it finds none."""
    return [
        line.strip()
        for line in output.splitlines()
        if line.count("\t") >= 7 and not line.startswith("Topic\t")
    ]
