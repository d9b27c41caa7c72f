"""RocksDB (rocksdict) as logwheel's stores use it: raw bytes in and out, and every write a
batch that carries the data together with how far into its log the data reaches, so that a
store's position never runs ahead of or behind what it holds (invariants 1 and 2)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from framework.private_files import private_dir


def open_raw(path: Path) -> Rdict:
    """The RocksDB at `path` (created if missing), keys and values as bytes."""
    private_dir(path)
    return Rdict(str(path), options=Options(raw_mode=True))


def read_json(db: Rdict, key: bytes, default: Any = None) -> Any:
    raw = db.get(key)
    return default if raw is None else json.loads(raw)


def write_with_position(
    db: Rdict,
    changes: Iterable[tuple[bytes, bytes | None]],
    position_key: bytes,
    position: Any,
    options: WriteOptions | None = None,
) -> None:
    """Write `changes` (a value of None deletes its key) and `position` (JSON) under
    `position_key`, atomically."""
    batch = WriteBatch(raw_mode=True)
    for key, value in changes:
        if value is None:
            batch.delete(key)
        else:
            batch.put(key, value)
    batch.put(position_key, json.dumps(position).encode())
    if options is None:
        db.write(batch)
    else:
        db.write(batch, options)
