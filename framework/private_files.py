"""Private files: what logwheel creates on disk is its user's alone.

Broker homes (Kafka's data: every topic and the metadata log with SCRAM keys and ACLs),
registry homes, state directories (RocksDB stores, instance ids) and caches are directories
of mode 0700, so another local user cannot read them past the broker's authentication; files
that hold data or secrets are 0600. The JVMs logwheel starts run with umask 077, so what they
create inside is private too (README, "Threat model").
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PRIVATE_UMASK = 0o077
"""The umask of the JVMs (Kafka, kafka-storage, the registry) logwheel starts."""


def private_dir(path: Path) -> Path:
    """`mkdir -p path` with mode 0700 for every directory it creates, and `path` itself made
    0700 if it was there already (an older home or state dir is closed at its next use)."""
    path = Path(path)
    missing = []
    for parent in (path, *path.parents):
        if parent.exists():
            break
        missing.append(parent)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent creator won
            directory.mkdir(mode=0o700)
    os.chmod(path, 0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by its owner alone (0600 from the start, no window)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
