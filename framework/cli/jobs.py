"""The commands that act on a pipeline's job: `run`, `topics`, `status`, `graph`, `reset`,
`backfill`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from framework.broker.bootstrap import bootstrap_from
from framework.cli.options import add_bootstrap, confirmed, env_int


def register_run(commands: argparse._SubParsersAction) -> None:
    from framework.serde.schemas import describe_search_path

    parser = commands.add_parser(
        "run",
        help="run computations of a pipeline until SIGTERM",
        description=f"{run.__doc__} Schemas: {describe_search_path()}",
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
        default=env_int("LOGWHEEL_METRICS_PORT"),
        metavar="N",
        help="serve Prometheus metrics on port N (0: a free one, logged; several computations: "
        "N, N+1, ...; else LOGWHEEL_METRICS_PORT; default off)",
    )
    parser.add_argument(
        "--metrics-addr",
        default=os.environ.get("LOGWHEEL_METRICS_ADDR") or "127.0.0.1",
        metavar="ADDR",
        help="the address metrics are served on (else LOGWHEEL_METRICS_ADDR, else 127.0.0.1; "
        "0.0.0.0: every interface)",
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
        "(1000: framework.streaming.membership.DEFAULT_COMMIT_INTERVAL_MS)",
    )
    parser.add_argument(
        "--standby",
        type=int,
        default=0,
        metavar="N",
        help="keep warm replicas of the N partitions after each owned one, so taking them "
        "over restores only the tail (0)",
    )
    parser.add_argument(
        "--serve",
        default=os.environ.get("LOGWHEEL_SERVE") or None,
        metavar="[HOST:]PORT",
        help="answer queries of the computations' state on HOST:PORT (HOST 127.0.0.1 unless "
        "given; several computations: PORT, PORT+1, ...; 0: free ports, found through the "
        "group; [serve] in --config: TLS, token; else LOGWHEEL_SERVE; default off)",
    )
    add_bootstrap(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Runs the named computations (all by default), one process each, until SIGTERM."""
    from framework.core.logs import setup
    from framework.streaming.state_dir import default_state_dir
    from framework.streaming.supervisor import run_computations

    setup(args.log_format)
    return run_computations(
        args.pipeline,
        args.computation,
        bootstrap=bootstrap_from(args.bootstrap),
        state_dir=args.state_dir or default_state_dir(),
        config_file=args.config,
        standby=args.standby,
        metrics_port=args.metrics_port,
        metrics_addr=args.metrics_addr,
        instance_id=args.instance_id,
        log_format=args.log_format,
        commit_interval_ms=args.commit_interval_ms,
        serve=args.serve,
    )


def register_topics(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "topics",
        help="create every topic of a pipeline with its policy",
        description=topics.__doc__,
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    add_bootstrap(parser)
    parser.add_argument(
        "--replication-factor",
        type=int,
        metavar="N",
        help="replicas of each new topic (default: one per broker up to 3; with 3 or more, "
        "min.insync.replicas 2)",
    )
    parser.set_defaults(func=topics)


def topics(args: argparse.Namespace) -> int:
    """Creates every topic of the pipeline with its policy; existing ones are left as they are."""
    from framework.kafka.topics import create_topics, pipeline_topics
    from framework.streaming.loading import kafka_settings, load_pipeline

    pipeline = load_pipeline(args.pipeline)
    created = set(
        create_topics(
            bootstrap_from(args.bootstrap),
            pipeline,
            client_config=kafka_settings(args.config),
            replication_factor=args.replication_factor,
        )
    )
    for spec in pipeline_topics(pipeline):
        state = "created" if spec.name in created else "exists"
        policy = spec.config.get("cleanup.policy", "delete")
        print(f"{state:8} {spec.name} ({spec.partitions} partitions, {policy})")
    return 0


def register_status(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "status",
        help="per computation and input partition: low watermark and its lag, consumer lag "
        "(records), last commit and owner",
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument("--json", action="store_true", help="JSON lines, one per partition")
    parser.add_argument("--watch", action="store_true", help="refresh every 2 s until Ctrl-C")
    add_bootstrap(parser)
    parser.set_defaults(func=show_status)


def show_status(args: argparse.Namespace) -> int:
    import dataclasses
    import json
    import time

    from rich.console import Console
    from rich.live import Live

    from framework.ops.status import status, status_table
    from framework.streaming.loading import kafka_settings, load_pipeline

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
    from framework.streaming.loading import load_pipeline

    print(graph(load_pipeline(args.pipeline)))
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
    parser.add_argument(
        "--yes", action="store_true", help="wipe without asking (a terminal is asked first)"
    )
    add_bootstrap(parser)
    parser.set_defaults(func=reset_command)


def reset_doc() -> str:
    from framework.ops import reset

    return reset.__doc__ or ""


def reset_command(args: argparse.Namespace) -> int:
    from framework.ops.reset import reset
    from framework.streaming.loading import kafka_settings, load_pipeline
    from framework.streaming.state_dir import default_state_dir

    def run(dry_run: bool) -> list[str]:
        return reset(
            pipeline,
            args.computation,
            args.to,
            bootstrap=bootstrap,
            state_dir=args.state_dir or default_state_dir(),
            wipe_state=args.wipe_state,
            dry_run=dry_run,
            kafka=kafka,
        )

    pipeline, kafka = load_pipeline(args.pipeline), kafka_settings(args.config)
    bootstrap = bootstrap_from(args.bootstrap)
    if args.wipe_state and not args.dry_run and not args.yes and sys.stdin.isatty():
        print("\n".join("would: " + line for line in run(dry_run=True)))
        if not confirmed(f"wipe {args.computation}'s state on {bootstrap}?", yes=False,
                         unattended=True):  # fmt: skip
            print("nothing done", file=sys.stderr)
            return 1
    plan = run(args.dry_run)
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
    add_bootstrap(parser)
    parser.set_defaults(func=backfill_command)


def backfill_command(args: argparse.Namespace) -> int:
    from framework.backfill.driver import backfill
    from framework.core.logs import setup
    from framework.streaming.loading import (
        kafka_settings,
        load_pipeline,
        registry_settings,
        spark_settings,
    )

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
        registry=registry_settings(args.config),
        tasks=args.tasks,
        progress=sys.stderr.isatty(),
    )
    print(summary.line(pipeline[args.computation].group), flush=True)
    return 0
