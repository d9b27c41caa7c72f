"""A local Kafka cluster of N nodes (`logwheel broker start --nodes 3`), for faults a single
broker cannot show: one broker of three dies or is cut off while the others carry on,
partitions change leaders and transactions meet a new coordinator.

Each node is a combined KRaft node (broker and controller voter, `node.id` I) with its own
directory `node-I/` under the home (its properties, data, pid and log, as a single broker keeps
them: `ClusterNode` is a `Broker` there), so killing a node may kill the active controller as
well, as in a production cluster whose controllers run beside their brokers. The home keeps
`cluster.json` (the number of nodes, fixed at the first start) and `ports.json` (each node's
client, inter-broker and controller ports, and the port clients are told to use: its own, or a
fault proxy's in front of it, `advertised_ports`).

Every internal topic and every new topic has replication factor min(N, 3) and
`min.insync.replicas` 2: a write is acknowledged once two replicas have it, and with three
nodes one may fail with neither writes nor the controller quorum stopping. Two nodes cannot
lose one either way (a quorum of two voters needs both).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from framework.broker.embedded import Broker
from framework.broker.launch import Launcher
from framework.broker.readiness import (
    QUIET,
    coordinator_partition,
    coordinators_serve,
    registered_brokers,
)
from framework.broker.roles import cluster_node, new_cluster_id, write_properties
from framework.broker.settings import (
    SINGLE_NODE_SETTINGS,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    BrokerError,
)
from framework.jvm.process import HomeLock, any_free_port, port_free, read_json
from framework.jvm.service import Say, Started, await_ready, say_to_stderr, stop_together
from framework.kafka.topics import MAX_REPLICAS, MIN_INSYNC_REPLICAS

MAX_NODES = 5
NODE_JVM_OPTS = ["-Xms128m", "-Xmx384m"]
"""Three nodes must fit beside the jobs of a developer's machine: a smaller heap than a single
broker's (JVM_OPTS), enough for the tests' load (later options win)."""
TRANSACTION_STATE = "__transaction_state"
CONSUMER_OFFSETS = "__consumer_offsets"


def cluster_settings(nodes: int) -> dict[str, str]:
    """Broker settings of every node of an N-node cluster: the single node's, replicated."""
    replicas = str(min(nodes, MAX_REPLICAS))
    insync = str(min(nodes, MIN_INSYNC_REPLICAS))
    return {
        **SINGLE_NODE_SETTINGS,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": insync,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": insync,
        "default.replication.factor": replicas,
        "min.insync.replicas": insync,
        # A stopped node hands its leaderships to the other replicas first (Kafka's default,
        # which a single node turns off: it has no other replicas).
        "controlled.shutdown.enable": "true",
    }


def cluster_size(home: Path) -> int | None:
    """The number of nodes of the cluster kept in `home`, or None if it holds none."""
    saved = read_json(Path(home) / "cluster.json")
    return saved.get("nodes") if saved else None


@dataclass(frozen=True)
class NodeState:
    """One node as `Cluster.nodes_state` sees it: its pid (None when down), the address
    clients use and how many partitions it leads."""

    node: int
    pid: int | None
    address: str
    leads: int


class ClusterNode(Broker):
    """Node I of a cluster: a combined KRaft node in `node-I/` of the cluster's home, whose
    properties the cluster writes (every node must name every voter)."""

    def __init__(self, cluster: Cluster, node: int) -> None:
        home, jvm_opts = cluster.home / f"node-{node}", [*NODE_JVM_OPTS, *cluster.jvm_opts]
        super().__init__(home, settings=cluster.settings, jvm_opts=jvm_opts)
        self.cluster, self.id = cluster, node
        self.jvm = self._service(self.node, self.listener_port, f"Kafka node {node}")

    def port(self) -> int | None:
        """The port clients use to reach this node (a proxy's, if it has one)."""
        saved = self.cluster.saved_ports().get(self.id)
        return saved["advertised"] if saved else None

    def address(self) -> str:
        return f"127.0.0.1:{self.port()}"

    def listener_port(self) -> int | None:
        """The port this node's own client listener is on (a proxy may front it)."""
        saved = self.cluster.saved_ports().get(self.id)
        return saved["port"] if saved else None


class Cluster:
    """N local Kafka nodes under one home (see the module doc). `advertised_ports` (node ->
    port), given at the first start, puts a fault proxy between the clients and each node:
    the node advertises that port and the proxy forwards to its client listener
    (`ports()[I]["port"]`). `settings` and `jvm_opts` apply to every node."""

    def __init__(
        self,
        home: Path | str,
        nodes: int | None = None,
        *,
        advertised_ports: dict[int, int] | None = None,
        settings: dict[str, str] | None = None,
        jvm_opts: list[str] | None = None,
    ) -> None:
        self.home = Path(home).resolve()
        saved = cluster_size(self.home)
        if nodes is not None and not 2 <= nodes <= MAX_NODES:
            raise BrokerError(f"--nodes {nodes}: a cluster has 2 to {MAX_NODES} nodes")
        if saved is not None and nodes is not None and nodes != saved:
            raise BrokerError(
                f"{self.home} holds a cluster of {saved} nodes: start it without --nodes, or "
                "give a cluster of another size a home of its own (LOGWHEEL_BROKER_DIR)"
            )
        if saved is None and nodes is None:
            raise BrokerError(f"{self.home} holds no cluster: start one with --nodes N")
        self.size = saved or nodes or 0
        self.settings = {**cluster_settings(self.size), **(settings or {})}
        self.jvm_opts = list(jvm_opts or [])
        self.advertised = dict(advertised_ports or {})
        self.ports_file = self.home / "ports.json"
        self.lock = HomeLock(self.home)
        self.nodes = {i: ClusterNode(self, i) for i in range(1, self.size + 1)}

    # -- queries ------------------------------------------------------------------------

    def saved_ports(self) -> dict[int, dict[str, int]]:
        """Each node's ports as saved at its first start: port (client listener), internal
        (replication), controller (quorum) and advertised (what clients are told)."""
        saved = read_json(self.ports_file) or {}
        return {int(node): ports for node, ports in saved.items()}

    def ports(self) -> dict[int, dict[str, int]]:
        """Each node's ports (see `saved_ports`), chosen and saved now if the cluster never
        started: a fault proxy needs the client listener's before the first start."""
        with self.lock():
            return self._choose_ports(running=[i for i, pid in self.pids().items() if pid])

    def bootstrap(self, nodes: list[int] | None = None) -> str:
        """The bootstrap address of the cluster (of `nodes`, if given)."""
        return ",".join(self.nodes[i].address() for i in nodes or sorted(self.nodes))

    def pids(self) -> dict[int, int | None]:
        """Each node's pid, None when it is down."""
        return {i: node.running_pid() for i, node in self.nodes.items()}

    def status(self) -> str | None:
        """The bootstrap address when at least one node runs, else None."""
        return self.bootstrap() if any(self.pids().values()) else None

    def admin(self):
        """An AdminClient of the cluster (quiet while a node is down)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap(), "logger": QUIET})

    def partitions(self, topic: str, timeout: float = 10.0) -> dict:
        """`topic`'s PartitionMetadata by partition (leader, replicas, isrs)."""
        meta = self.admin().list_topics(topic, timeout=timeout).topics[topic]
        if meta.error is not None:
            raise BrokerError(f"topic {topic!r}: {meta.error.str()}")
        return meta.partitions

    def leader(self, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
        """The node leading `topic`'s `partition` (-1 while it has no leader)."""
        return self.partitions(topic, timeout)[partition].leader

    def group_coordinator(self, group: str, timeout: float = 10.0) -> int:
        """The node whose group coordinator serves `group` (the leader of its
        `__consumer_offsets` partition)."""
        return self._coordinator(CONSUMER_OFFSETS, group, timeout)

    def transaction_coordinator(self, transactional_id: str, timeout: float = 10.0) -> int:
        """The node whose transaction coordinator serves `transactional_id` (the leader of
        its `__transaction_state` partition)."""
        return self._coordinator(TRANSACTION_STATE, transactional_id, timeout)

    def _coordinator(self, topic: str, key: str, timeout: float) -> int:
        partitions = self.partitions(topic, timeout)
        return partitions[coordinator_partition(key, len(partitions))].leader

    def controller(self) -> int | None:
        """The active KRaft controller (the quorum's leader) as the running nodes last recorded
        it (each node's `quorum-state`, the latest epoch wins); None while it is unknown or
        down."""
        seen = []
        for i, pid in self.pids().items():
            state = read_json(self.nodes[i].data_dir / "__cluster_metadata-0" / "quorum-state")
            if pid and state and state.get("leaderId", -1) > 0:
                seen.append((state.get("leaderEpoch", -1), state["leaderId"]))
        leader = max(seen)[1] if seen else None
        return leader if leader and self.nodes[leader].running_pid() else None

    def under_replicated(self, timeout: float = 10.0) -> list[tuple[str, int, list, list]]:
        """(topic, partition, replicas, in-sync replicas) of every partition missing one."""
        topics = self.admin().list_topics(timeout=timeout).topics
        return sorted(
            (name, p.id, list(p.replicas), list(p.isrs))
            for name, meta in topics.items()
            for p in meta.partitions.values()
            if len(p.isrs) < len(p.replicas)
        )

    def nodes_state(self, timeout: float = 10.0) -> list[NodeState]:
        """Every node: pid, address, partitions it leads (0 for a node that is down)."""
        pids = self.pids()
        leads: dict[int, int] = {}
        if any(pids.values()):
            topics = self.admin().list_topics(timeout=timeout).topics
            for meta in topics.values():
                for p in meta.partitions.values():
                    leads[p.leader] = leads.get(p.leader, 0) + 1
        return [
            NodeState(i, pids[i], node.address(), leads.get(i, 0)) for i, node in self.nodes.items()
        ]

    # -- start / stop -------------------------------------------------------------------

    def start(
        self,
        node: int | None = None,
        timeout: float = START_TIMEOUT_S,
        say: Say = say_to_stderr,
    ) -> Started:
        """Start every node that is down (or node `node` alone) and return once the nodes
        started are registered and the cluster's group and transaction coordinators serve;
        idempotent. A node restarted while others run waits until the controller has fenced
        its previous incarnation (`Fencing.await_fence`): before that it would act on the
        leaderships it replayed."""
        began = time.monotonic()
        targets = [self._node(node)] if node is not None else sorted(self.nodes)
        with self.lock():
            self._check_home()
            pids = {i: n.running_pid(say) for i, n in self.nodes.items()}
            down = [i for i in targets if pids[i] is None]
            if down:
                kafka = Launcher.find()
                ports = self._choose_ports(running=[i for i, pid in pids.items() if pid])
                (self.home / "cluster.json").write_text(json.dumps({"nodes": self.size}) + "\n")
                formed = [n.node.cluster_id() for n in self.nodes.values() if n.node.formatted]
                cluster = (formed or [new_cluster_id()])[0]
                others_up = any(pid for i, pid in pids.items() if i not in down)
                for i in down:
                    member = self.nodes[i]
                    advertised = ports[i]["advertised"]
                    settings = cluster_node(i, ports, advertised, member.data_dir)
                    member.home.mkdir(parents=True, exist_ok=True)
                    write_properties(member.config_file, {**self.settings, **settings})
                    if others_up:
                        member.fencing.await_fence(None, timeout, say)
                    pids[i] = member.launch(kafka, member.node, cluster)
                    say(f"starting Kafka node {i} in {member.home} (pid {pids[i]}) ...")
            self._wait_ready(targets, pids, began + timeout)
            if down:
                kafka.keep_archive()
            first = pids[targets[0]] or 0
            return Started(self.bootstrap(), bool(down), time.monotonic() - began, first)

    def stop(
        self, node: int | None = None, timeout: float = STOP_TIMEOUT_S
    ) -> dict[int, int | None]:
        """Stop node `node` (SIGTERM: a controlled shutdown hands its leaderships over), or
        every node at once (SIGKILL after `timeout` s); the pids stopped, by node."""
        if node is not None:
            return {node: self.nodes[self._node(node)].stop(timeout)}
        with self.lock():
            stopped = stop_together([n.jvm for n in self.nodes.values()], timeout)
            pids = dict(zip(self.nodes, stopped, strict=True))
            for i, pid in pids.items():
                if pid is not None:
                    self.nodes[i].fencing.went_down()
            return pids

    def kill(self, node: int) -> int | None:
        """SIGKILL node `node`, as a crash would; the pid it had, or None."""
        return self.nodes[self._node(node)].kill()

    # -- the steps of a start -----------------------------------------------------------

    def _node(self, node: int) -> int:
        if node not in self.nodes:
            raise BrokerError(f"--node {node}: the cluster's nodes are 1 to {self.size}")
        return node

    def _check_home(self) -> None:
        if (self.home / "data" / "meta.properties").exists():
            raise BrokerError(
                f"{self.home} holds a single broker: give the cluster a home of its own "
                "(LOGWHEEL_BROKER_DIR) or remove that directory"
            )

    def _choose_ports(self, running: list[int]) -> dict[int, dict[str, int]]:
        """Each node's ports: saved ones are kept (every node names every voter's controller
        port, and clients keep their bootstrap); a node's first start takes free ones, its
        client port LOGWHEEL_BROKER_PORT + I - 1 if that is set."""
        ports = self.saved_ports()
        taken = {p for node in ports.values() for p in node.values()}
        base = os.environ.get("LOGWHEEL_BROKER_PORT")
        if base is not None and not base.isdigit():
            raise BrokerError(f"LOGWHEEL_BROKER_PORT={base!r} is not a port number")
        for i in sorted(self.nodes):
            if i in ports:
                if i not in running:
                    self._check_free(i, ports[i])
                continue
            chosen: dict[str, int] = {}
            for name in ("port", "internal", "controller"):
                wanted = int(base) + i - 1 if base and name == "port" else None
                if wanted is not None and not port_free(wanted):
                    raise BrokerError(
                        f"port {wanted} (node {i}: LOGWHEEL_BROKER_PORT + {i - 1}) is taken by "
                        "another program: stop it, or set LOGWHEEL_BROKER_PORT to a free range"
                    )
                while wanted is None or wanted in taken:
                    wanted = any_free_port()
                chosen[name] = wanted
                taken.add(wanted)
            chosen["advertised"] = self.advertised.get(i, chosen["port"])
            ports[i] = chosen
        self.home.mkdir(parents=True, exist_ok=True)
        self.ports_file.write_text(json.dumps({str(i): p for i, p in ports.items()}) + "\n")
        return ports

    def _check_free(self, node: int, ports: dict[str, int]) -> None:
        for name in ("port", "internal", "controller"):
            if not port_free(ports[name]):
                raise BrokerError(
                    f"node {node}'s {name} port {ports[name]} (saved in {self.ports_file}) is "
                    "taken by another program: stop it (the other nodes name that port)"
                )

    def _wait_ready(self, targets: list[int], pids: dict, deadline: float) -> None:
        """Wait until every node of `targets` is registered (unfenced) in the cluster's
        metadata, then until the group and transaction coordinators serve."""
        bootstrap = self.bootstrap()
        partitions = int(self.settings["offsets.topic.num.partitions"])
        watched = {self.nodes[i].jvm: pids[i] for i in targets if pids[i]}

        def ready() -> bool:
            for i in targets:
                taken = self.nodes[i].jvm.port_taken(pids[i])
                if taken is not None:  # whatever answers there is not that node
                    raise BrokerError(taken)
            return (
                all(self.nodes[i].jvm.serves(pids[i]) for i in targets)
                and set(targets) <= registered_brokers(bootstrap, {})
                and coordinators_serve(bootstrap, {}, partitions, deadline)
            )

        if not await_ready(watched, ready, deadline, interval=0.5):
            raise BrokerError(
                f"nodes {targets} of the cluster did not register, or its group and "
                "transaction coordinators did not load, within the timeout; see the logs "
                f"under {self.home}"
            )
