"""`logwheel registry start|stop|status`: the embedded Schema Registry."""

from __future__ import annotations

import argparse

from framework.registry.embedded import START_TIMEOUT_S, STOP_TIMEOUT_S, Registry, default_home

NOT_RUNNING = 3
"""Exit code of `registry status` when the registry is not running (as for LSB init scripts)."""


def register_registry(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "registry",
        help="the embedded Schema Registry (Confluent-compatible API)",
        description="A Schema Registry (Apicurio Registry, its Confluent-compatible API) on "
        "127.0.0.1, its jar built with Maven at the first use. Its schemas (in an H2 "
        "database, so ids survive restarts), log and pid live in LOGWHEEL_REGISTRY_DIR "
        "(default .logwheel/registry); LOGWHEEL_REGISTRY_PORT picks the port (default the "
        "one of its last start, else 8081; a free one if that is taken); "
        "LOGWHEEL_REGISTRY_JVM_OPTS adds JVM options.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser(
        "start", help="start it unless it runs; prints its URL on the last line"
    )
    start.add_argument(
        "--timeout",
        type=float,
        default=START_TIMEOUT_S,
        help=f"seconds to wait for its API once the JVM runs ({START_TIMEOUT_S:.0f})",
    )
    start.set_defaults(func=registry_start)
    stop = actions.add_parser("stop", help="stop it (SIGTERM, SIGKILL after --timeout)")
    stop.add_argument(
        "--timeout",
        type=float,
        default=STOP_TIMEOUT_S,
        help=f"seconds to wait ({STOP_TIMEOUT_S:.0f})",
    )
    stop.set_defaults(func=registry_stop)
    status = actions.add_parser(
        "status", help=f"exit 0 and its URL when it runs, else exit {NOT_RUNNING}"
    )
    status.set_defaults(func=registry_status)


def registry_start(args: argparse.Namespace) -> int:
    registry = Registry(default_home())
    started = registry.start(timeout=args.timeout)
    if started.started:
        print(f"registry ready in {started.seconds:.1f}s (pid {started.pid})")
    else:
        print(f"registry already running (pid {started.pid}), answered in {started.seconds:.1f}s")
    print(started.address, flush=True)
    return 0


def registry_stop(args: argparse.Namespace) -> int:
    registry = Registry(default_home())
    pid = registry.stop(timeout=args.timeout)
    print(f"registry stopped (pid {pid})" if pid else f"registry was not running ({registry.home})")
    return 0


def registry_status(args: argparse.Namespace) -> int:
    registry = Registry(default_home())
    url = registry.status()
    if url is None:
        print(f"registry not running ({registry.home})")
        return NOT_RUNNING
    print(f"registry running (pid {registry.running_pid()}, schemas in {registry.data_dir})")
    print(url, flush=True)
    return 0
