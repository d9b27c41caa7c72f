"""The bootstrap address every command resolves the contract's way: `--bootstrap`, else
`LOGWHEEL_BOOTSTRAP`, else the embedded broker or cluster of `LOGWHEEL_BROKER_DIR` (whichever
that home holds), started if needed."""

from __future__ import annotations

import os
from pathlib import Path

from framework.broker.cluster import Cluster, cluster_size
from framework.broker.embedded import Broker, default_home
from framework.jvm.service import say_to_stderr


def open_home(home: Path | None = None) -> Broker | Cluster:
    """The cluster kept in `home` (default `default_home()`) if it holds one, else its single
    broker."""
    home = home or default_home()
    return Cluster(home) if cluster_size(home) else Broker(home)


def ensure_running(home: Path | None = None) -> str:
    """Start the embedded broker or cluster unless it runs; return its bootstrap address."""
    return open_home(home).start(say=say_to_stderr).address


def bootstrap_from(args_bootstrap: str | None) -> str:
    """The contract's resolution: `--bootstrap`, else `LOGWHEEL_BOOTSTRAP`, else the embedded
    broker or cluster, started if needed."""
    return args_bootstrap or os.environ.get("LOGWHEEL_BOOTSTRAP") or ensure_running()
