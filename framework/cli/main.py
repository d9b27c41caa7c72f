"""`logwheel`, the command line.

Each command is a `register_*` function that adds its subparser and sets `func`, the function
that runs it: `func(args) -> int` returns the exit code. A new command is one more register
function in `COMMANDS`. Errors the user can fix (`USER_ERRORS`) are printed as one line
`logwheel: ...` with exit code 1, without a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from framework.broker.embedded import Broker, bootstrap_from, default_home
from framework.errors import ConfigurationError, Fatal
from framework.ops.acls import register_acls

USER_ERRORS: tuple[type[Exception], ...] = (ConfigurationError, Fatal)
NOT_RUNNING = 3
"""Exit code of `broker status` when the broker is not running (as for LSB init scripts)."""


# -- logwheel broker start|stop|status ------------------------------------------------------


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


# -- logwheel run / topics ------------------------------------------------------------------


def _add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        metavar="H:P",
        help="Kafka bootstrap servers (else LOGWHEEL_BOOTSTRAP, else the embedded broker)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE.toml",
        help="client settings from its [kafka] table ([spark] for backfill)",
    )


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"logwheel: {name}={value!r}: give a port number") from None


def register_run(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "run", help="run computations of a pipeline until SIGTERM", description=run.__doc__
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument(
        "--computation",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this computation (repeatable; all by default)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="local state (else LOGWHEEL_STATE_DIR, else .logwheel/state)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=_env_int("LOGWHEEL_METRICS_PORT"),
        metavar="N",
        help="serve Prometheus metrics on port N (0: a free one, logged; several computations: "
        "N, N+1, ...; else LOGWHEEL_METRICS_PORT; default off)",
    )
    parser.add_argument(
        "--instance-id",
        default=os.environ.get("LOGWHEEL_INSTANCE_ID") or None,
        metavar="ID",
        help="this process's stable identity (static group member and transactional id), e.g. "
        "a StatefulSet pod name; else LOGWHEEL_INSTANCE_ID, else one kept in the state dir",
    )
    parser.add_argument(
        "--log-format",
        choices=("plain", "json"),
        default=None,
        help="plain lines or JSON lines (time, level, logger, message, fields); else "
        "LOGWHEEL_LOG_FORMAT, else plain",
    )
    parser.add_argument(
        "--commit-interval-ms",
        type=int,
        metavar="MS",
        help="under a backlog, commit at least this often; a drained input commits at once "
        "(1000: framework.streaming.runner.DEFAULT_COMMIT_INTERVAL_MS)",
    )
    parser.add_argument(
        "--standby",
        type=int,
        default=0,
        metavar="N",
        help="keep warm replicas of the N partitions after each owned one, so taking them "
        "over restores only the tail (0)",
    )
    _add_bootstrap(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Runs the named computations (all by default), one process each, until SIGTERM."""
    from framework.core.logs import setup
    from framework.streaming.launch import run_computations
    from framework.streaming.runner import default_state_dir

    setup(args.log_format)
    return run_computations(
        args.pipeline,
        args.computation,
        bootstrap=bootstrap_from(args.bootstrap),
        state_dir=args.state_dir or default_state_dir(),
        config_file=args.config,
        standby=args.standby,
        metrics_port=args.metrics_port,
        instance_id=args.instance_id,
        log_format=args.log_format,
        commit_interval_ms=args.commit_interval_ms,
    )


def register_topics(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "topics",
        help="create every topic of a pipeline with its policy",
        description=topics.__doc__,
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    _add_bootstrap(parser)
    parser.set_defaults(func=topics)


def topics(args: argparse.Namespace) -> int:
    """Creates every topic of the pipeline with its policy; existing ones are left as they are."""
    from framework.kafka.topics import create_topics, pipeline_topics
    from framework.streaming.launch import kafka_settings, load_pipeline

    pipeline = load_pipeline(args.pipeline)
    created = set(
        create_topics(
            bootstrap_from(args.bootstrap), pipeline, client_config=kafka_settings(args.config)
        )
    )
    for spec in pipeline_topics(pipeline):
        state = "created" if spec.name in created else "exists"
        policy = spec.config.get("cleanup.policy", "delete")
        print(f"{state:8} {spec.name} ({spec.partitions} partitions, {policy})")
    return 0


def register_schemas(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "schemas", help="the record types in schemas/ and their versions (schemas/history/)"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", help="fail when a version breaks backward or forward compatibility"
    )
    check.set_defaults(func=schemas_check)


def schemas_check(args: argparse.Namespace) -> int:
    """Every version of every type against the one before it, both ways (Avro resolution)."""
    from framework.serde.codecs import load_schemas
    from framework.serde.compat import check

    schemas = load_schemas()
    problems = check(schemas)
    for problem in problems:
        print(f"logwheel schemas check: {problem}", file=sys.stderr)
    versions = sum(len(v) for v in schemas.history.values()) + len(schemas)
    verdict = f"{len(problems)} incompatible change(s)" if problems else "all compatible"
    print(f"schemas: {len(schemas)} types, {versions} versions in {schemas.directory}: {verdict}")
    return 1 if problems else 0


def register_status(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "status",
        help="per computation and input partition: low watermark and its lag, consumer lag "
        "(records), last commit and owner",
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument("--json", action="store_true", help="JSON lines, one per partition")
    parser.add_argument("--watch", action="store_true", help="refresh every 2 s until Ctrl-C")
    _add_bootstrap(parser)
    parser.set_defaults(func=show_status)


def show_status(args: argparse.Namespace) -> int:
    import dataclasses
    import json
    import time

    from rich.console import Console
    from rich.live import Live

    from framework.ops.status import status, status_table
    from framework.streaming.launch import kafka_settings, load_pipeline

    pipeline = load_pipeline(args.pipeline)
    bootstrap, kafka = bootstrap_from(args.bootstrap), kafka_settings(args.config)
    if args.json:
        while True:
            for row in status(pipeline, bootstrap, kafka):
                print(json.dumps(dataclasses.asdict(row)), flush=True)
            if not args.watch:
                return 0
            time.sleep(2)
    if not args.watch:
        Console().print(status_table(pipeline.name, status(pipeline, bootstrap, kafka)))
        return 0
    with Live(status_table(pipeline.name, []), refresh_per_second=1) as live:
        try:
            while True:
                live.update(status_table(pipeline.name, status(pipeline, bootstrap, kafka)))
                time.sleep(2)
        except KeyboardInterrupt:
            return 0


def register_graph(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("graph", help="the topology as Graphviz dot")
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.set_defaults(func=show_graph)


def show_graph(args: argparse.Namespace) -> int:
    from framework.ops.status import graph
    from framework.streaming.launch import load_pipeline

    print(graph(load_pipeline(args.pipeline)))
    return 0


def register_changelog(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("changelog", help="print a changelog topic as JSON lines")
    parser.add_argument("action", choices=["dump", "follow"])
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument(
        "--spark", action="store_true", help="dump through Spark (changelog.spark.read_snapshot)"
    )
    parser.add_argument("--master", default="local[*]", help="Spark master with --spark")
    _add_bootstrap(parser)
    parser.set_defaults(func=changelog_command)


def changelog_command(args: argparse.Namespace) -> int:
    """`dump`: the latest value per key; `follow`: then every change, live, until Ctrl-C."""
    import json

    from changelog import ChangelogTable
    from framework.streaming.launch import kafka_settings

    bootstrap = bootstrap_from(args.bootstrap)
    if args.spark:
        if args.action != "dump":
            raise ConfigurationError("--spark reads a snapshot: use it with dump, not follow")
        from changelog.spark import read_snapshot
        from framework.backfill.session import session

        spark = session(args.master, "logwheel-changelog-dump")
        try:
            snapshot = read_snapshot(
                spark, args.topic, bootstrap=bootstrap, kafka=kafka_settings(args.config)
            )
            for row in snapshot.toLocalIterator():
                print(json.dumps({"key": row["key"], "value": json.loads(row["value"])}))
        finally:
            spark.stop()
        return 0
    with ChangelogTable(args.topic, bootstrap=bootstrap, kafka=kafka_settings(args.config)) as t:
        t.catch_up(progress=sys.stderr.isatty())
        if args.action == "dump":
            for key, value in t.items():
                print(json.dumps({"key": key, "value": value}, default=str), flush=False)
            return 0
        for key, old, new in t.follow():
            print(json.dumps({"key": key, "old": old, "new": new}, default=str), flush=True)
    return 0


def register_reset(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reset", help="reprocess history: move a computation's offsets", description=reset_doc()
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument("--computation", required=True, metavar="NAME")
    parser.add_argument("--to", required=True, metavar="earliest|latest|ISO-DATETIME")
    parser.add_argument("--wipe-state", action="store_true", help="also empty its state")
    parser.add_argument("--dry-run", action="store_true", help="only say what it would do")
    parser.add_argument("--state-dir", type=Path, default=None, help="local state to remove")
    _add_bootstrap(parser)
    parser.set_defaults(func=reset_command)


def reset_doc() -> str:
    from framework.ops import reset

    return reset.__doc__ or ""


def reset_command(args: argparse.Namespace) -> int:
    from framework.ops.reset import reset
    from framework.streaming.launch import kafka_settings, load_pipeline
    from framework.streaming.runner import default_state_dir

    plan = reset(
        load_pipeline(args.pipeline),
        args.computation,
        args.to,
        bootstrap=bootstrap_from(args.bootstrap),
        state_dir=args.state_dir or default_state_dir(),
        wipe_state=args.wipe_state,
        dry_run=args.dry_run,
        kafka=kafka_settings(args.config),
    )
    print("\n".join(("would: " if args.dry_run else "done: ") + line for line in plan))
    return 0


def register_backfill(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "backfill",
        help="run a computation over its inputs' history on Spark, then hand over to `run`",
        description="Runs the computation from where it stands (committed offsets, else "
        "--from; its state, timers and watermark) to --until on Spark, writing outputs, "
        "changelog, timers, marks and the group's offsets exactly once. A backfill that died "
        "is finished by running it again. [spark] in --config passes Spark settings.",
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument("--computation", required=True, metavar="NAME")
    parser.add_argument(
        "--from",
        dest="start",
        default="earliest",
        metavar="earliest|ISO-DATETIME",
        help="where partitions without a committed offset start (earliest)",
    )
    parser.add_argument(
        "--until", default="latest", metavar="latest|ISO-DATETIME", help="end of the range"
    )
    parser.add_argument("--master", default="local[*]", help="Spark master URL (local[*])")
    parser.add_argument(
        "--tasks", type=int, default=None, help="Spark tasks (the cluster's default parallelism)"
    )
    _add_bootstrap(parser)
    parser.set_defaults(func=backfill_command)


def backfill_command(args: argparse.Namespace) -> int:
    from framework.backfill.driver import backfill
    from framework.core.logs import setup
    from framework.streaming.launch import kafka_settings, load_pipeline, spark_settings

    setup(None)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines are about sockets
    pipeline = load_pipeline(args.pipeline)
    summary = backfill(
        pipeline,
        args.computation,
        bootstrap=bootstrap_from(args.bootstrap),
        start=args.start,
        until=args.until,
        master=args.master,
        spark_conf=spark_settings(args.config),
        kafka=kafka_settings(args.config),
        tasks=args.tasks,
        progress=sys.stderr.isatty(),
    )
    print(summary.line(pipeline[args.computation].group), flush=True)
    return 0


# -- the entry point ------------------------------------------------------------------------

COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    register_broker,
    register_run,
    register_topics,
    register_status,
    register_graph,
    register_changelog,
    register_reset,
    register_backfill,
    register_schemas,
    register_acls,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logwheel",
        description="Stream processing on Kafka: MillWheel's model, built the Samza way.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `logwheel` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except USER_ERRORS as err:
        print(f"logwheel: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
