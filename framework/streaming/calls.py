"""What the main thread is running, as the watchdog (framework/streaming/watchdog.py) reads it.

The per-record path pays one attribute store for it: the tasks set `calling` to the message
whose record they handle (decode, key extractor, dedup and hook alike), the executor to the
(key, Timer) pair whose timer fires, and both set it back to None when done; the loop counts
its rounds. No clock is read and no thread is woken per record: the watchdog samples these
every fraction of a second.

After a process was ended with the GIL held (nothing in it could write down which call it was
in: `DeadMan`), the next one runs with `DurableCalls`, which also writes each call's identity
into a file mapped in memory before the call starts — about 0.45 µs a record (against 0.003 µs
for `Calls`), and what the kernel keeps when the process dies — so that a second such death
names the call.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path
from typing import Any

from framework.streaming.hung_calls import Call

SLOT_BYTES = 65_536
_HEAD = struct.Struct("<qqq")
"""A slot's head: the length of the topic's name (a record: partition, offset follow), or minus
the length of a timer's JSON, or 0 (no call); the name or JSON from byte 24 on."""


class Calls:
    """The call the main thread is in (None between calls) and how many rounds its loop ran."""

    __slots__ = ("calling", "rounds")

    def __init__(self) -> None:
        self.calling: Any = None
        self.rounds = 0


class CallSlot:
    """A file that holds the identity of one call, written through a shared mapping: what was
    written is the file's content even if the process is killed the next instant."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, SLOT_BYTES)
            self._map = mmap.mmap(fd, SLOT_BYTES)
        finally:
            os.close(fd)
        self._names: dict[str, bytes] = {}

    def write(self, token: Any) -> None:
        """Write what `Calls.calling` holds: a message, a (key, Timer) pair or None."""
        mapped, pack = self._map, _HEAD.pack_into
        pack(mapped, 0, 0, 0, 0)  # no call while the rest changes
        if token is None:
            return
        if type(token) is tuple:
            key, timer = token
            text = json.dumps([key, timer.tag, timer.time, timer.domain]).encode()
            text = text[: SLOT_BYTES - 24]
            mapped[24 : 24 + len(text)] = text
            pack(mapped, 0, -len(text), 0, 0)
            return
        topic = token.topic()
        name = self._names.get(topic)
        if name is None:
            name = self._names[topic] = topic.encode()[: SLOT_BYTES - 24]
        mapped[24 : 24 + len(name)] = name
        pack(mapped, 0, len(name), token.partition(), token.offset())

    def close(self) -> None:
        self._map.close()

    @staticmethod
    def read(path: Path) -> Call | None:
        """The call a slot file names, None if it names none or cannot be read."""
        try:
            raw = path.read_bytes()
            size, partition, offset = _HEAD.unpack_from(raw)
            body = raw[24 : 24 + abs(size)]
            if size > 0 and len(body) == size:
                return ("record", body.decode(), partition, offset)
            if size < 0 and len(body) == -size:
                key, tag, time, domain = json.loads(body)
                return ("timer", key, tag, time, domain)
        except (OSError, ValueError, TypeError, struct.error):
            pass
        return None


class DurableCalls(Calls):
    """`Calls` whose every call is also written to a `CallSlot` before it starts."""

    __slots__ = ("slot",)

    def __init__(self, slot: CallSlot) -> None:
        self.slot = slot
        super().__init__()

    @property  # type: ignore[override]
    def calling(self) -> Any:
        return Calls.calling.__get__(self)  # type: ignore[attr-defined]

    @calling.setter
    def calling(self, token: Any) -> None:
        self.slot.write(token)
        Calls.calling.__set__(self, token)  # type: ignore[attr-defined]
