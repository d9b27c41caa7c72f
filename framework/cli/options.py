"""Options several `logwheel` commands share."""

from __future__ import annotations

import argparse
import os


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
        raise SystemExit(f"logwheel: {name}={value!r}: give a port number") from None
