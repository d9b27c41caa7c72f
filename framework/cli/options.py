"""Options several `logwheel` commands share."""

from __future__ import annotations

import argparse
import os
import sys

from framework.errors import ConfigurationError


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        metavar="H:P",
        help="Kafka bootstrap servers (else LOGWHEEL_BOOTSTRAP, else the embedded broker)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE.toml",
        help="client settings from its [kafka] table ([registry] for run, [spark] for backfill)",
    )


def env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(f"{name}={value!r}: give a port number") from None


def confirmed(question: str, *, yes: bool, unattended: bool) -> bool:
    """Whether to go on with something destructive: `yes` (a --yes flag) goes on; at a
    terminal the user answers `question`; from a script (no terminal) `unattended` decides."""
    if yes:
        return True
    if not sys.stdin.isatty():
        return unattended
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
