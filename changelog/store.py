"""Where a `ChangelogTable` keeps its rows: a dict, or RocksDB (rocksdict) for tables that
outgrow memory, with the read positions in the same atomic batch as the rows, so a reopened
table resumes from them and reads only the tail."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch

_ROW = b"r"
_POSITIONS = b"p:positions"


class MemoryRows:
    """Decoded rows in a dict; nothing survives a restart."""

    def __init__(self, decode: Callable[[bytes], Any]) -> None:
        self._decode = decode
        self._rows: dict[str, Any] = {}
        self.positions: dict[int, int] = {}

    def get(self, key: str) -> Any:
        return self._rows.get(key)

    def apply(self, changes: list[tuple[str, bytes | None]], positions: dict[int, int]) -> list:
        """Write (key, raw value or None) changes; returns (key, old, new) for each."""
        out = []
        for key, raw in changes:
            new = None if raw is None else self._decode(raw)
            old = self._rows.pop(key, None) if new is None else self._rows.get(key)
            if new is not None:
                self._rows[key] = new
            out.append((key, old, new))
        self.positions.update(positions)
        return out

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(list(self._rows.items()))

    def __len__(self) -> int:
        return len(self._rows)

    def close(self) -> None:
        pass


class RocksRows:
    """Raw rows in RocksDB, decoded on read; positions saved with every batch."""

    def __init__(self, path: Path, decode: Callable[[bytes], Any]) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._decode = decode
        self._db = Rdict(str(path), options=Options(raw_mode=True))
        raw = self._db.get(_POSITIONS)
        self.positions: dict[int, int] = {} if raw is None else {
            int(p): o for p, o in json.loads(raw).items()
        }  # fmt: skip

    def get(self, key: str) -> Any:
        raw = self._db.get(_ROW + key.encode())
        return None if raw is None else self._decode(raw)

    def apply(self, changes: list[tuple[str, bytes | None]], positions: dict[int, int]) -> list:
        out, batch = [], WriteBatch(raw_mode=True)
        pending: dict[bytes, bytes | None] = {}
        for key, raw in changes:
            row = _ROW + key.encode()
            before = pending[row] if row in pending else self._db.get(row)
            pending[row] = raw
            out.append((key, None if before is None else self._decode(before),
                        None if raw is None else self._decode(raw)))  # fmt: skip
            if raw is None:
                batch.delete(row)
            else:
                batch.put(row, raw)
        self.positions.update(positions)
        batch.put(_POSITIONS, json.dumps(self.positions).encode())
        self._db.write(batch)
        return out

    def items(self) -> Iterator[tuple[str, Any]]:
        for key, raw in self._db.items(from_key=_ROW):
            if not key.startswith(_ROW):
                break
            yield key[1:].decode(), self._decode(raw)

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def close(self) -> None:
        self._db.close()
