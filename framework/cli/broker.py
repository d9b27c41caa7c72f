"""`logwheel broker start|stop|kill|status`: the embedded Kafka broker, or cluster."""

from __future__ import annotations

import argparse

from framework.broker.bootstrap import open_home
from framework.broker.cluster import Cluster
from framework.broker.embedded import Broker, default_home
from framework.broker.settings import BrokerError

NOT_RUNNING = 3
"""Exit code of `broker status` when the broker is not running (as for LSB init scripts)."""


def register_broker(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "broker",
        help="the embedded Kafka broker, one node or a cluster",
        description="Embedded Kafka (KRaft) on 127.0.0.1, one node or a cluster of N "
        "(--nodes). Its data, logs and pids live in LOGWHEEL_BROKER_DIR (default "
        ".logwheel/broker; .logwheel/secure-broker with --secure); LOGWHEEL_BROKER_PORT picks "
        "the client port at the first start (a cluster's node I takes it + I - 1; default "
        "9092 for one node, 9094 with --secure, a free port if that is taken or for a cluster).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser(
        "start", help="start it unless it runs; prints the bootstrap address on the last line"
    )
    start.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (60)")
    start.add_argument(
        "--separate-controller",
        action="store_true",
        help="run the KRaft controller in a JVM of its own (a home keeps its mode; stop "
        "stops both)",
    )
    start.add_argument(
        "--nodes",
        type=int,
        metavar="N",
        help="a cluster of N nodes (2 to 5; replication factor min(N, 3), min.insync.replicas "
        "2); a home keeps its size",
    )
    start.set_defaults(func=broker_start)
    stop = actions.add_parser("stop", help="stop it (SIGTERM, SIGKILL after --timeout)")
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (30)")
    stop.set_defaults(func=broker_stop)
    kill = actions.add_parser("kill", help="SIGKILL one node of a cluster, as a crash would")
    kill.set_defaults(func=broker_kill)
    status = actions.add_parser(
        "status", help=f"exit 0 and its address when it runs, else exit {NOT_RUNNING}"
    )
    status.set_defaults(func=broker_status)
    for action in (start, stop, kill, status):
        action.add_argument(
            "--secure",
            action="store_true",
            help="the secure broker: SASL_SSL (SCRAM-SHA-512), TLS certificates and users "
            "made at its first start, ACLs required (its own home and port)",
        )
    for action in (start, stop, kill):
        action.add_argument(
            "--node",
            type=int,
            metavar="I",
            required=action is kill,
            help="only node I of a cluster (nodes are numbered 1 to N, their node.id)",
        )


def _home(args: argparse.Namespace) -> Broker | Cluster:
    """The home's cluster or broker; `--node` asks for a cluster."""
    found = open_home(default_home(args.secure))
    if getattr(args, "node", None) is not None and isinstance(found, Broker):
        raise BrokerError(f"--node: {found.home} holds a single broker, not a cluster")
    return found


def broker_start(args: argparse.Namespace) -> int:
    home = default_home(args.secure)
    if args.nodes is not None and args.nodes > 1:
        if args.secure or args.separate_controller:
            raise BrokerError("--nodes: a cluster is plain, with controllers in its nodes")
        target: Broker | Cluster = Cluster(home, args.nodes)
    else:
        target = _home(args)
    if isinstance(target, Cluster):
        started = target.start(node=args.node, timeout=args.timeout)
        print("\n".join(_describe(target)))
        print(started.address, flush=True)
        return 0
    broker = Broker(home, secure=args.secure, separate_controller=args.separate_controller)
    started = broker.start(timeout=args.timeout)
    if started.started:
        print(f"broker ready in {started.seconds:.1f}s (pid {started.pid})")
    else:
        print(f"broker already running (pid {started.pid}), answered in {started.seconds:.1f}s")
    if broker.secure:
        print("\n".join(broker.credentials.describe(started.address)))
    print(started.address, flush=True)
    return 0


def broker_stop(args: argparse.Namespace) -> int:
    target = _home(args)
    if isinstance(target, Cluster):
        for node, pid in target.stop(node=args.node, timeout=args.timeout).items():
            print(f"node {node} stopped (pid {pid})" if pid else f"node {node} was not running")
        return 0
    pid = target.stop(timeout=args.timeout)
    print(f"broker stopped (pid {pid})" if pid else f"broker was not running ({target.home})")
    return 0


def broker_kill(args: argparse.Namespace) -> int:
    target = _home(args)
    if not isinstance(target, Cluster):
        raise BrokerError(f"{target.home} holds no cluster: kill acts on one node of a cluster")
    pid = target.kill(args.node)
    print(f"node {args.node} killed (pid {pid})" if pid else f"node {args.node} was not running")
    return 0


def broker_status(args: argparse.Namespace) -> int:
    target = _home(args)
    bootstrap = target.status()
    if bootstrap is None:
        print(f"broker not running ({target.home})")
        return NOT_RUNNING
    if isinstance(target, Cluster):
        print("\n".join(_describe(target)))
        return 0
    pids = f"pid {target.running_pid()}"
    if target.separate:
        pids += f", controller pid {target.controller_pid()}"
    print(f"broker running at {bootstrap} ({pids}, data in {target.home})")
    return 0


def _describe(cluster: Cluster) -> list[str]:
    """One line per node, then the under-replicated partitions."""
    states = cluster.nodes_state()
    up = sum(1 for s in states if s.pid)
    lines = [f"cluster of {cluster.size} nodes, {up} running (data in {cluster.home})"]
    for s in states:
        state = f"running (pid {s.pid}), leads {s.leads} partitions" if s.pid else "down"
        lines.append(f"node {s.node} at {s.address}: {state}")
    controller = cluster.controller()
    lines.append(
        f"active controller: node {controller}" if controller else "active controller: none"
    )
    under = cluster.under_replicated()
    lines.append(f"under-replicated partitions: {len(under)}")
    lines += [f"  {t}-{p}: replicas {r}, in sync {i}" for t, p, r, i in under[:20]]
    if len(under) > 20:
        lines.append(f"  ... and {len(under) - 20} more")
    return lines
