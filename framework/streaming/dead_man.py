"""The dead-man switch of a `logwheel run` process: what ends it when its main thread holds the
GIL for good.

A hook stuck in C code that never releases the GIL (a regular expression backtracking, a C
extension blocking without releasing it) stops every Python thread of its process, the
watchdog's too: no signal handler runs and nothing can be written down. faulthandler's timer
is a C thread that needs no GIL: armed for `delay_s` and re-armed by the watchdog each time it
runs, it fires only when the watchdog could not run for that long, dumps every thread's stack
into the state directory and ends the process (exit status 1). The next start reads the dump
(`previous`): the process was ended by its switch, not by a crash or a kill.
"""

from __future__ import annotations

import faulthandler
import os
from pathlib import Path
from typing import IO

DUMP = "dead-man.txt"


class DeadMan:
    """faulthandler's timer, armed with a file in `directory` to dump the stacks into."""

    def __init__(self, directory: Path, delay_s: float) -> None:
        self.dump = Path(directory) / DUMP
        self.delay_s = delay_s
        self._file: IO[str] | None = None
        self._armed_at: float | None = None

    def previous(self) -> str | None:
        """The stacks the switch dumped when it ended the previous process, else None."""
        try:
            text = self.dump.read_text(errors="replace")
        except FileNotFoundError:
            return None
        return text or None

    def forget(self) -> None:
        """Empty the dump, once the death it tells of was dealt with."""
        if self.dump.exists():
            self.dump.write_text("")

    def arm(self, now: float) -> None:
        """Arm the switch (emptying the previous dump: read it first)."""
        fd = os.open(self.dump, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._file = os.fdopen(fd, "w")
        self._armed_at = None
        self.rearm(now)

    def rearm(self, now: float) -> None:
        """Push the switch `delay_s` past now; a quarter of its delay at most since the last
        time (each arming starts a C thread)."""
        if self._file is None:
            return
        if self._armed_at is None or now - self._armed_at >= self.delay_s / 4:
            faulthandler.dump_traceback_later(self.delay_s, exit=True, file=self._file)
            self._armed_at = now

    def disarm(self) -> None:
        """Disarm it for good, leaving the dump empty: this process ends by its own way."""
        if self._file is not None:
            faulthandler.cancel_dump_traceback_later()
            self._file.close()
            self._file = None
