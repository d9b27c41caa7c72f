"""The hook calls the watchdog abandoned, remembered in the computation's state directory, so
that the work — started again from the last commit, in this process or the next — dead-letters
each of them at stage "timeout" instead of calling its hook again (as `RefusedRecords` isolates
a record whose production the broker refuses).

A call is a record, `("record", topic, partition, offset)`, or a timer's firing, `("timer", key,
tag, time, domain)`: a timer has no input record, so it is dropped with a dead letter that
describes it, as a timer whose hook raises is. The state directory is private to one process
of the computation (framework/streaming/state_dir.py), so a plain file serves; a record whose
partition has moved to another process meets that process's own watchdog there.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from framework.private_files import write_private

log = logging.getLogger(__name__)

Call = tuple
"""("record", topic, partition, offset) or ("timer", key, tag, time, domain)."""
FILE = "hung-calls.json"
MAX_CALLS = 10_000
"""The most calls remembered; past it the oldest are forgotten (each was remembered because
its hook would not return: so many means the hook, not the input, needs fixing)."""


def call_of(token: Any) -> Call:
    """The identity of what `Calls.calling` holds: a Kafka message (a record, whatever the
    task) or a (key, Timer) pair (a timer's firing)."""
    if type(token) is tuple:
        key, timer = token
        return ("timer", key, timer.tag, timer.time, timer.domain)
    return ("record", token.topic(), token.partition(), token.offset())


def describe(call: Call) -> str:
    """A call as a log line or dead letter names it."""
    if call[0] == "record":
        return f"record {call[1]}[{call[2]}]@{call[3]}"
    return f"timer {call[2]!r} of key {call[1]!r} at {call[3]} ({call[4]} time)"


class HungCalls:
    """The remembered calls and why each was abandoned; added to by the watchdog's thread,
    read and settled by the main thread."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE
        self._lock = threading.Lock()
        self._calls: dict[Call, str] = _load(self.path)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def __contains__(self, call: Call) -> bool:
        return call in self._calls

    def add(self, call: Call, reason: str) -> None:
        """Remember `call`, on disk before this returns: the process may end next."""
        with self._lock:
            self._calls[call] = reason
            while len(self._calls) > MAX_CALLS:
                del self._calls[next(iter(self._calls))]
            self._save()

    def records(self) -> dict[tuple[str, int, int], str]:
        """(topic, partition, offset) -> reason, of every remembered record."""
        with self._lock:
            return {c[1:]: why for c, why in self._calls.items() if c[0] == "record"}

    def timers(self) -> dict[tuple[str, str, str], str]:
        """(key, tag, domain) -> reason, of every remembered timer: a timer is its key and
        tag (setting it again moves it)."""
        with self._lock:
            return {(c[1], c[2], c[4]): why for c, why in self._calls.items() if c[0] == "timer"}

    def settle_timer(self, key: str, tag: str, domain: str) -> None:
        """Forget the timer (key, tag) of `domain`, at whatever time it was remembered."""
        with self._lock:
            calls = [
                c
                for c in self._calls
                if c[0] == "timer" and (c[1], c[2], c[4]) == (key, tag, domain)
            ]
        self.settle(calls)

    def settle(self, calls: Iterable[Call]) -> None:
        """Forget calls whose dead letters committed."""
        with self._lock:
            gone = [c for c in calls if self._calls.pop(c, None) is not None]
            if gone:
                self._save()

    def passed(self, positions: Mapping[tuple[str, int], int]) -> None:
        """Forget the records below their partition's committed position: their dead letters
        committed (or their partition was reset past them)."""
        if self._calls:
            self.settle(
                c
                for c in list(self._calls)
                if c[0] == "record" and c[3] < positions.get((c[1], c[2]), -1)
            )

    def _save(self) -> None:
        entries = [{"call": list(c), "reason": why} for c, why in self._calls.items()]
        temporary = self.path.with_suffix(".tmp")
        write_private(temporary, json.dumps(entries))
        os.replace(temporary, self.path)


def _load(path: Path) -> dict[Call, str]:
    """The calls `path` names; none if it is missing, and none (with a warning) if it cannot
    be read: a call forgotten is abandoned again when met, nothing is lost."""
    try:
        entries = json.loads(path.read_text())
        calls = {}
        for entry in entries:
            call, reason = entry["call"], entry["reason"]
            if _shaped(call) and isinstance(reason, str):
                calls[tuple(call)] = reason
        return calls
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, KeyError) as error:
        log.warning("ignoring %s, which cannot be read: %s", path, error)
        return {}


def _shaped(call: object) -> bool:
    if not isinstance(call, list):
        return False
    if len(call) == 4 and call[0] == "record":
        return isinstance(call[1], str) and all(type(v) is int for v in call[2:])
    return (
        len(call) == 5
        and call[0] == "timer"
        and all(isinstance(v, str) for v in (call[1], call[2], call[4]))
        and type(call[3]) is int
    )
