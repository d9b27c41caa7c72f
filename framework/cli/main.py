"""`logwheel`, the command line.

Each command is a `register_*` function that adds its subparser and sets `func`, the function
that runs it: `func(args) -> int` returns the exit code. A new command is one more register
function in `COMMANDS`. Errors the user can fix (`USER_ERRORS`: bad configuration, a reason
to stop, a cluster or service that does not answer) are printed as one line `logwheel: ...`
with exit code 1, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from framework.cli.acls import register_acls
from framework.cli.broker import register_broker
from framework.cli.data import register_changelog, register_schemas
from framework.cli.dlq import register_dlq
from framework.cli.jobs import (
    register_backfill,
    register_graph,
    register_reset,
    register_run,
    register_status,
    register_topics,
)
from framework.cli.jvm import register_jars
from framework.cli.registry import register_registry
from framework.cli.rescale import register_rescale
from framework.cli.state import register_state
from framework.cli.ui import register_ui
from framework.errors import ConfigurationError, Fatal, Retry

USER_ERRORS: tuple[type[Exception], ...] = (ConfigurationError, Fatal, Retry)
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    register_broker,
    register_registry,
    register_run,
    register_topics,
    register_status,
    register_graph,
    register_changelog,
    register_reset,
    register_backfill,
    register_rescale,
    register_schemas,
    register_acls,
    register_jars,
    register_ui,
    register_state,
    register_dlq,
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
    try:  # building the parser reads defaults from the environment, which may be wrong
        args = build_parser().parse_args(argv)
        return args.func(args)
    except USER_ERRORS as err:
        print(f"logwheel: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
