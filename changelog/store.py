"""Where a `ChangelogTable` keeps its rows: a dict, or RocksDB (rocksdict) for tables that
outgrow memory, with the read positions in the same atomic batch as the rows, so a reopened
table resumes from them and reads only the tail."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from framework.state.rocks import open_raw, read_json, write_with_position

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
        """Write (key, raw value or None) changes; returns (key, old, new) for each. All or
        nothing: every value is decoded before the first row changes."""
        out = []
        decoded = [(key, None if raw is None else self._decode(raw)) for key, raw in changes]
        for key, new in decoded:
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
        self._decode = decode
        self._db = open_raw(path)
        saved = read_json(self._db, _POSITIONS, {})
        self.positions: dict[int, int] = {int(p): o for p, o in saved.items()}

    def get(self, key: str) -> Any:
        raw = self._db.get(_ROW + key.encode())
        return None if raw is None else self._decode(raw)

    def apply(self, changes: list[tuple[str, bytes | None]], positions: dict[int, int]) -> list:
        out = []
        pending: dict[bytes, bytes | None] = {}
        for key, raw in changes:
            row = _ROW + key.encode()
            before = pending[row] if row in pending else self._db.get(row)
            pending[row] = raw
            out.append((key, None if before is None else self._decode(before),
                        None if raw is None else self._decode(raw)))  # fmt: skip
        self.positions.update(positions)
        write_with_position(self._db, pending.items(), _POSITIONS, self.positions)
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
