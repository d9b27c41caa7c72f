"""`logwheel broker start|stop|status`: the embedded Kafka broker."""

from __future__ import annotations

import argparse

from framework.broker.embedded import Broker, default_home

NOT_RUNNING = 3
"""Exit code of `broker status` when the broker is not running (as for LSB init scripts)."""


def register_broker(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "broker",
        help="the embedded single-node Kafka broker",
        description="Embedded single-node Kafka (KRaft) on 127.0.0.1. Its data, log and pid "
        "live in LOGWHEEL_BROKER_DIR (default .logwheel/broker; .logwheel/secure-broker with "
        "--secure); LOGWHEEL_BROKER_PORT picks the port at the first start (default 9092, "
        "9094 with --secure, or a free one if that is taken).",
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
    start.set_defaults(func=broker_start)
    stop = actions.add_parser("stop", help="stop it (SIGTERM, SIGKILL after --timeout)")
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (30)")
    stop.set_defaults(func=broker_stop)
    status = actions.add_parser(
        "status", help=f"exit 0 and its address when it runs, else exit {NOT_RUNNING}"
    )
    status.set_defaults(func=broker_status)
    for action in (start, stop, status):
        action.add_argument(
            "--secure",
            action="store_true",
            help="the secure broker: SASL_SSL (SCRAM-SHA-512), TLS certificates and users "
            "made at its first start, ACLs required (its own home and port)",
        )


def broker_start(args: argparse.Namespace) -> int:
    broker = Broker(
        default_home(args.secure), secure=args.secure, separate_controller=args.separate_controller
    )
    started = broker.start(timeout=args.timeout)
    if started.started:
        print(f"broker ready in {started.seconds:.1f}s (pid {started.pid})")
    else:
        print(f"broker already running (pid {started.pid}), answered in {started.seconds:.1f}s")
    if broker.secure:
        print("\n".join(broker.credentials.describe(started.bootstrap)))
    print(started.bootstrap, flush=True)
    return 0


def broker_stop(args: argparse.Namespace) -> int:
    broker = Broker(default_home(args.secure))
    pid = broker.stop(timeout=args.timeout)
    print(f"broker stopped (pid {pid})" if pid else f"broker was not running ({broker.home})")
    return 0


def broker_status(args: argparse.Namespace) -> int:
    broker = Broker(default_home(args.secure))
    bootstrap = broker.status()
    if bootstrap is None:
        print(f"broker not running ({broker.home})")
        return NOT_RUNNING
    pids = f"pid {broker.running_pid()}"
    if broker.separate:
        pids += f", controller pid {broker.controller_pid()}"
    print(f"broker running at {bootstrap} ({pids}, data in {broker.home})")
    return 0
