"""The watchdog: one daemon thread per `logwheel run` process bounding what its main thread runs
(a computation's `hook_timeout_ms`: a hook or client call that never returns is bounded,
dead-lettered at stage "timeout", never a hang).

The main thread says what it runs through `Calls` (one attribute store per record); the
watchdog looks every `period_s`, counting only time it was awake to see (a process stopped or
starved of CPU does not time its hooks out). A hook call past `hook_timeout_ms`:

1. is remembered on disk (`HungCalls`), logged and counted (`logwheel_hook_timeouts_total`),
   and the main thread interrupted: a signal whose handler raises `Abandoned` — time.sleep,
   socket reads, lock waits, pure-Python loops and confluent-kafka's wakeable poll, consume and
   flush end there (PEP 475: an interrupted system call is not retried when the handler
   raises). The membership ends uncommitted; the next one goes on from the last commit and
   dead-letters the record at stage "timeout";
2. still running `margin_s` later (a C call that waits on regardless of signals, a hook that
   swallows the exception, signals blocked), the process starts again in place
   (framework/streaming/in_place.py: same pid, `logwheel run` stays up; one asked to stop ends
   instead), and the new image dead-letters the record, read back from disk;
3. if the main thread holds the GIL for good, no thread of the process runs, this one
   included: the dead-man switch (framework/streaming/dead_man.py) ends the process after
   `hook_timeout_ms + 2 margin_s` (10 s at least); the supervisor of `logwheel run` starts
   it again (a lone computation's process is restarted by what runs it), and calls are then
   recorded durably (`DurableCalls`) until one is known.

A main thread that makes no progress outside hooks for `STALL_S` (a call into Kafka's client
blocked past any bound it was given: each known one has its own, framework/kafka/bounded_calls.py)
is treated alike, the log line naming the call from the main thread's stack. Only a runner that
owns its process (`logwheel run`) interrupts, restarts and arms the switch; one in a thread of
another program (a test) is only watched, logged and counted.
"""

from __future__ import annotations

import linecache
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from framework.core.metrics import HOOK_TIMEOUTS, STUCK_CALLS
from framework.errors import Abandoned
from framework.streaming.calls import Calls, CallSlot, DurableCalls
from framework.streaming.dead_man import DeadMan
from framework.streaming.hung_calls import HungCalls, call_of, describe
from framework.streaming.in_place import Restart

log = logging.getLogger(__name__)

MARGIN_MIN_S = 1.0
"""The least time an interrupted call is given to return before the process starts again (a
quarter of the hook timeout, at least this): a signal's handler runs at once in a call that
can be interrupted."""
DEAD_MAN_MIN_S = 10.0
"""The least time the watchdog may go without running before the dead-man switch ends the
process: a process starved of CPU on a loaded machine must not be taken for one whose main
thread holds the GIL."""
STALL_S = 600.0
"""How long the main thread may go without a round of its loop outside any hook. Every call it
makes into Kafka's client returns (or is left behind) well within this: the longest, a commit's
transactional steps retried, within about three minutes."""
SLOT = "calling"
INTERRUPT = signal.SIGRTMIN + 5 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR2
"""The signal that interrupts the main thread: a real-time one nothing else in a job uses."""


class Watched(Protocol):
    """The part whose process a watchdog watches (a computation, a sink)."""

    name: str

    @property
    def group(self) -> str: ...

    @property
    def hook_timeout_ms(self) -> int: ...


@dataclass(frozen=True)
class Bounds:
    """How long a hook call may run (`hook_timeout_ms`), how long an interrupted one is given
    to return, and how long the main thread may go without progress outside hooks."""

    hook_s: float
    margin_s: float
    stall_s: float = STALL_S

    @classmethod
    def of(cls, spec: Watched) -> Bounds:
        hook = spec.hook_timeout_ms / 1000
        return cls(hook, max(MARGIN_MIN_S, hook / 4))

    @property
    def period_s(self) -> float:
        """How often the watchdog looks: an eighth of the hook timeout, between 50 ms and 1 s."""
        return min(1.0, max(0.05, self.hook_s / 8))

    @property
    def dead_man_s(self) -> float:
        return max(DEAD_MAN_MIN_S, self.hook_s + 2 * self.margin_s)


class Watchdog:
    """Watches `calls` against `bounds`; `interrupt` and `restart` act on the process (None:
    watch only)."""

    def __init__(
        self,
        spec: Watched,
        calls: Calls,
        hung: HungCalls,
        bounds: Bounds,
        *,
        interrupt: Callable[[], None] | None = None,
        restart: Callable[[], None] | None = None,
        dead_man: DeadMan | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec, self.calls, self.hung, self.bounds = spec, calls, hung, bounds
        self._interrupt, self._restart, self._dead_man = interrupt, restart, dead_man
        self._clock = clock
        self._last = clock()
        self._token: Any = None  # the call seen at the last look, and how long it has run
        self._in_call = 0.0
        self._hook_stage = 0  # 1: interrupted, 2: restarting
        self._rounds = calls.rounds
        self._stalled = 0.0  # awake time without a round of the loop, outside any hook
        self._stall_stage = 0
        self._expected: Callable[[], bool] | None = None  # what the signal handler checks
        self._why = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one look -------------------------------------------------------------------------

    def check(self) -> None:
        """Look at what the main thread runs now and act on what has run too long."""
        now = self._clock()
        awake = min(now - self._last, 2 * self.bounds.period_s)
        self._last = now
        if self._dead_man is not None:
            self._dead_man.rearm(now)
        token, rounds = self.calls.calling, self.calls.rounds
        if token is not self._token:
            self._token, self._in_call, self._hook_stage = token, 0.0, 0
        elif token is not None:
            self._in_call += awake
        if token is not None or rounds != self._rounds:
            self._rounds, self._stalled, self._stall_stage = rounds, 0.0, 0
        else:
            self._stalled += awake
        bounds = self.bounds
        if token is not None:
            if self._hook_stage == 0 and self._in_call >= bounds.hook_s:
                self._hook_stage = 1
                self._abandon_hook(token)
            elif self._hook_stage == 1 and self._in_call >= bounds.hook_s + bounds.margin_s:
                self._hook_stage = 2
                self._start_again(f"the hook call on {describe(call_of(token))}")
        elif self._stall_stage == 0 and self._stalled >= bounds.stall_s:
            self._stall_stage = 1
            self._abandon_stall(rounds)
        elif self._stall_stage == 1 and self._stalled >= bounds.stall_s + bounds.margin_s:
            self._stall_stage = 2
            self._start_again(f"the call {main_call()[1]}")

    def _abandon_hook(self, token: Any) -> None:
        call, ms = call_of(token), self.spec.hook_timeout_ms
        self.hung.add(call, f"its hook call ran past hook_timeout_ms={ms} and was abandoned")
        HOOK_TIMEOUTS.labels(self.spec.name).inc()
        log.error(
            "%s: the hook call on %s ran past hook_timeout_ms=%d: abandoning it; the work goes "
            "on from the last commit and dead-letters it at stage 'timeout'",
            self.spec.group,
            describe(call),
            ms,
        )
        calls = self.calls
        self._interrupt_main(
            lambda: calls.calling is token, f"hook call on {describe(call)} past {ms} ms"
        )

    def _abandon_stall(self, rounds: int) -> None:
        label, where = main_call()
        STUCK_CALLS.labels(self.spec.name, label).inc()
        log.error(
            "%s: the main thread made no progress for %.0f s, in %s: interrupting it; the work "
            "starts again from the last commit",
            self.spec.group,
            self._stalled,
            where,
        )
        calls = self.calls
        self._interrupt_main(
            lambda: calls.calling is None and calls.rounds == rounds, f"no progress in {where}"
        )

    def _interrupt_main(self, expected: Callable[[], bool], why: str) -> None:
        if self._interrupt is not None:
            self._expected, self._why = expected, why
            self._interrupt()

    def on_signal(self, signum: int, frame: object) -> None:
        """The main thread's signal handler: raise `Abandoned` if it is still in the call the
        signal was sent for (it may have returned meanwhile)."""
        expected, self._expected = self._expected, None
        if expected is not None and expected():
            raise Abandoned(self._why)

    def _start_again(self, what: str) -> None:
        if self._restart is None:
            log.error("%s: %s is still running and cannot be interrupted", self.spec.group, what)
            return
        log.critical(
            "%s: %s is still running %g s after it was interrupted: starting the process again",
            self.spec.group,
            what,
            self.bounds.margin_s,
        )
        self._restart()

    # -- the thread -----------------------------------------------------------------------

    def start(self) -> Watchdog:
        if self._interrupt is not None:  # the handler must be set in the main thread
            signal.signal(INTERRUPT, self.on_signal)
        if self._dead_man is not None:
            self._dead_man.arm(self._clock())
        self._thread = threading.Thread(
            target=self._watch, name=f"{self.spec.group}.watchdog", daemon=True
        )
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(self.bounds.period_s):
            try:
                self.check()
            except Exception:  # never ends the thread: the dead-man switch would fire
                log.exception("%s: the watchdog's look failed", self.spec.group)

    def close(self) -> None:
        """Stop watching (the signal handler stays: a signal already sent finds nothing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._dead_man is not None:
            self._dead_man.disarm()
        if isinstance(self.calls, DurableCalls):
            self.calls.slot.close()


def start_watchdog(spec: Watched, directory: Path, stop: threading.Event | None = None) -> Watchdog:
    """The watchdog of a runner of `spec` whose state directory is `directory`, started; with
    `stop`, the runner owns its process and runs in its main thread: the watchdog interrupts
    that thread, starts the process again in place (unless stopping) and arms the dead-man
    switch. A previous process ended by the switch is reported here: the call its slot names
    is remembered, or, unknown, the calls of this process are recorded durably."""
    hung = HungCalls(directory)
    bounds = Bounds.of(spec)
    dead_man = DeadMan(directory, bounds.dead_man_s)
    slot = Path(directory) / SLOT
    durable = False
    previous = dead_man.previous()
    if previous is not None:
        call = CallSlot.read(slot)
        if call is not None:
            hung.add(call, f"its hook call held the GIL past {bounds.dead_man_s:g} s")
            HOOK_TIMEOUTS.labels(spec.name).inc()
            found = f"it was in the hook call on {describe(call)}, dead-lettered at 'timeout'"
        else:
            durable = True
            found = "which call is not known: this process writes each call down until one is"
        log.error(
            "%s: the previous process was ended by its dead-man switch (its main thread held "
            "the GIL for %g s); %s. Its stacks:\n%s",
            spec.group,
            bounds.dead_man_s,
            found,
            previous[-4000:],
        )
        dead_man.forget()
    if not durable:
        slot.unlink(missing_ok=True)
    calls = DurableCalls(CallSlot(slot)) if durable else Calls()
    powers: dict[str, Any] = {}
    if stop is not None:
        main = threading.main_thread().ident
        assert main is not None
        powers = {
            "interrupt": lambda: signal.pthread_kill(main, INTERRUPT),
            "restart": Restart(stop),
            "dead_man": dead_man,
        }
    return Watchdog(spec, calls, hung, bounds, **powers).start()


def main_call() -> tuple[str, str]:
    """What the main thread is in, from its innermost Python frame: a label (the function's
    qualified name) and a description with the file, line and source of the call."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    if frame is None:
        return "unknown", "an unknown call"
    code = frame.f_code
    source = linecache.getline(code.co_filename, frame.f_lineno).strip()
    where = f"{code.co_qualname} ({Path(code.co_filename).name}:{frame.f_lineno}: {source})"
    return code.co_qualname, where
