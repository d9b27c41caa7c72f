"""A computation's state directory: where it is, held by one `logwheel run` process at a time,
and the instance id kept in it that outlives restarts."""

from __future__ import annotations

import fcntl
import os
import uuid
from pathlib import Path
from typing import IO

from framework.core.pipeline import PipelineError
from framework.private_files import private_dir, write_private


def lock_state_dir(directory: Path) -> IO:
    """Hold `directory` for this process's life; a second `logwheel run` on it is refused."""
    private_dir(directory)  # RocksDB stores and the instance id: the owner's alone
    lock = open(directory / "lock", "a+")  # noqa: SIM115 - held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise PipelineError(
            f"state dir {directory} is in use by another `logwheel run`: "
            "give each instance its own --state-dir"
        ) from None
    return lock


def instance_id(directory: Path, given: str | None) -> str:
    """`given` if any (an orchestrator's stable pod name), else one kept in the state dir:
    stable across restarts, so a restarted process keeps its partitions (static membership)
    and its transactional id aborts what its killed predecessor left open."""
    if given:
        return given
    path = directory / "instance-id"
    if not path.exists():
        write_private(path, uuid.uuid4().hex[:12])
    return path.read_text().strip()


def default_state_dir() -> Path:
    """`LOGWHEEL_STATE_DIR`, else `.logwheel/state` under the current directory."""
    return Path(os.environ.get("LOGWHEEL_STATE_DIR", ".logwheel/state"))
