"""Starting a `logwheel run` process again in place, when its main thread is stuck in a call
nothing can interrupt (framework/streaming/watchdog.py): `os.execv` of its own command line,
so the pid — what a container runtime, a supervisor or a test watches — stays, and nothing of
the old image stays but standard input and output (its stuck thread, clients, stores, locks).

A process asked to stop meanwhile ends instead: its SIGTERM's handler may never have run (the
main thread runs Python signal handlers, and it is stuck), so the stop signals are also read
from the interpreter's wakeup fd, which its C-level handler writes whatever the main thread
does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading

log = logging.getLogger(__name__)
STOPS = frozenset((signal.SIGTERM, signal.SIGINT))


class Restart:
    """The restart of this process, set up in its main thread: `stop` is the runner's."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self._signals, write = os.pipe()
        os.set_blocking(self._signals, False)
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)

    def stopping(self) -> bool:
        """Whether the process was asked to stop (SIGTERM or SIGINT), handled or not."""
        if self.stop.is_set():
            return True
        with contextlib.suppress(BlockingIOError):
            return not STOPS.isdisjoint(os.read(self._signals, 65_536))
        return False

    def __call__(self) -> None:
        """Start this process again in place — or, asked to stop, end it: what it had not
        committed is done again by its next start."""
        if self.stopping():
            log.warning("asked to stop: ending the process instead")
            _flush_logs()
            os._exit(0)
        restart_in_place()


def restart_in_place() -> None:
    """Replace this process by a new run of its own command line (same pid, arguments and
    environment), with no descriptor of this one but standard input and output."""
    _flush_logs()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):
                os.set_inheritable(fd, False)
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def _flush_logs() -> None:
    """Flush the log handlers, waiting a second at most: the stuck main thread may hold a
    stream's lock."""
    flushing = threading.Thread(target=_flush, daemon=True)
    flushing.start()
    flushing.join(1.0)


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
