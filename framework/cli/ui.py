"""`logwheel ui`: the dashboard of a running pipeline (framework/ops/dashboard_server.py)."""

from __future__ import annotations

import argparse
import shlex

from framework.broker.bootstrap import bootstrap_from
from framework.cli.options import add_bootstrap

DEFAULT_PORT = 8470


def register_ui(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "ui",
        help="a read-only web page of a pipeline: its graph, watermarks, lags, dead letters",
        description=ui.__doc__,
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, metavar="N",
        help=f"serve on 127.0.0.1:N ({DEFAULT_PORT}; 0: a free port, printed)",
    )  # fmt: skip
    add_bootstrap(parser)
    parser.set_defaults(func=ui)


def ui(args: argparse.Namespace) -> int:
    """Serves a read-only page on 127.0.0.1: the pipeline's graph and, per computation and
    partition, the owner and standbys, the low watermark and its lag, which upstream partition
    holds it back, consumer lag, records per second, the last commit, dead letters by stage
    (with the command that replays them) and state size, refreshed every few seconds; the same
    data as JSON at /api/pipeline. Runs until SIGTERM or Ctrl-C."""
    from framework.core.logs import setup
    from framework.ops.dashboard_server import serve
    from framework.streaming.loading import kafka_settings, load_pipeline

    setup(None)
    pipeline = load_pipeline(args.pipeline)
    bootstrap = bootstrap_from(args.bootstrap)
    options = [] if args.bootstrap is None else ["--bootstrap", args.bootstrap]
    options += [] if args.config is None else ["--config", args.config]
    try:
        serve(
            pipeline,
            args.pipeline,
            bootstrap,
            kafka_settings(args.config),
            args.port,
            shlex.join(options),
            say=lambda line: print(f"logwheel ui: {line}", flush=True),
        )
    except KeyboardInterrupt:  # Ctrl-C ends it as SIGTERM does
        return 0
    return 0
