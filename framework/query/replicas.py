"""What one `logwheel run` process can answer queries from: the stores of the partitions it
owns (running, their restore done) and of those it keeps standby replicas of, with how far each
standby has read its changelog. The membership's loop registers and forgets them; the query
server's threads read them.

A store is forgotten before it closes, under the lock every read holds, so a read never meets
a closed RocksDB. Only committed state is ever read: a task's store is written after its
transaction commits (invariant 1), a standby's from the changelog read_committed.

An owned partition answers only while the loop goes round (`beat`, each round): a process
whose loop stalled (a starved machine, SIGSTOP and SIGCONT) may have lost its partitions to
another instance without having seen it yet, and would answer what it last committed while
the new owner moves on; it answers nothing until its loop has gone round again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol

STALE_S = 5.0
"""How long after the loop's last round an owned partition still answers: half the group's
10 s session timeout (`framework.kafka.config`), so a member the group may already have
replaced has stopped answering before then."""


class ReadableStore(Protocol):
    def load(self, key: str) -> bytes | None: ...

    def checkpoint(self) -> dict[str, int]: ...


@dataclass
class _Held:
    store: ReadableStore
    active: bool
    position: int = -1  # a standby's changelog position, past what it applied (-1: unknown)


@dataclass(frozen=True)
class Read:
    """A key's committed document as one replica holds it; `applied`: for a standby, the
    changelog offset it has read up to (the lag is the changelog's end less this)."""

    raw: bytes | None
    active: bool
    applied: int


class Replicas:
    """The stores this process holds, by partition; safe to read from any thread."""

    def __init__(self, clock=time.monotonic) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        self._clock = clock
        self._beat = clock()

    def beat(self) -> None:
        """The loop went round: it would have seen a loss of its partitions by now."""
        self._beat = self._clock()

    def activate(self, partition: int, store: ReadableStore) -> None:
        """`partition` is owned and restored: its store answers as the active replica."""
        with self._lock:
            self._held[partition] = _Held(store, True)

    def follow(self, partition: int, store: ReadableStore) -> None:
        """A standby replica of `partition` is followed in `store`."""
        with self._lock:
            self._held[partition] = _Held(store, False)

    def followed(self, partition: int, position: int) -> None:
        """The standby of `partition` has applied its changelog up to `position`."""
        with self._lock:
            held = self._held.get(partition)
            if held is not None and not held.active:
                held.position = max(held.position, position)

    def forget(self, partition: int) -> None:
        """Called before the partition's store closes: no read reaches it afterwards."""
        with self._lock:
            self._held.pop(partition, None)

    def forget_all(self) -> None:
        with self._lock:
            self._held.clear()

    def read(self, partition: int, key: str) -> Read | None:
        """`key`'s committed document in this process's replica of `partition`, if it holds
        one. A standby's position is at least its store's checkpoint (the offset after the
        last changelog record it applied), so its lag is never under-stated."""
        with self._lock:
            held = self._held.get(partition)
            if held is None or (held.active and self._clock() - self._beat > STALE_S):
                return None
            raw = held.store.load(key)
            if held.active:
                return Read(raw, True, -1)
            applied = max(held.position, held.store.checkpoint().get("changelog", 0))
            return Read(raw, False, applied)

    def holds(self) -> dict[int, bool]:
        """Partition -> whether it is held as the active replica (else as a standby)."""
        with self._lock:
            return {p: h.active for p, h in self._held.items()}
