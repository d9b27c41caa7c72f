"""Calls into librdkafka that may block past their own timeout, made in a thread of their own so
that the caller can stop waiting and leave them behind.

librdkafka's transactional calls to a coordinator do not always honour their timeout: asked
again after a time-out, `send_offsets_to_transaction` blocked for minutes once the group
coordinator's broker had been killed or restarted, and its process stopped polling until the
group expelled it (confluentinc/librdkafka#5456: a coordinator request's deadline is never
checked; #5511). The caller gives such a client up and makes new ones.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from framework.errors import Rejoin


class LeftBehind(Rejoin, TimeoutError):
    """A call still blocked when its caller stopped waiting: its client is lost to that call,
    so the caller gives it up and makes new ones (a `Rejoin`). A `TimeoutError` too, as a
    future's own wait raises."""


class BoundedCalls:
    """A daemon thread making one call at a time; `call` waits for each at most `wait` s.

    A daemon, unlike a concurrent.futures worker, which the interpreter joins at exit: a call
    left behind must not keep the process from ending. It starts with the first call and ends
    with `close` or when this object is collected (a join that failed half-way closes
    nothing)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue | None = None
        self.stuck: str | None = None  # the name of a call left behind, if any

    def call(self, fn: Callable[..., Any], *args: Any, wait: float) -> Any:
        """`fn(*args)`'s result or exception; `LeftBehind` if it has not returned after `wait`
        s, and from then on at once (the thread is still inside that call)."""
        if self.stuck is not None:
            raise LeftBehind(f"{self.stuck} is still blocked")
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(target=_work, args=(self._jobs,), name=self.name, daemon=True).start()
        future: Future = Future()
        self._jobs.put((future, fn, args))
        try:
            return future.result(wait)
        except TimeoutError:
            self.stuck = getattr(fn, "__name__", repr(fn))
            raise LeftBehind(f"{self.stuck} has not returned after {wait:g} s") from None

    def close(self) -> None:
        """End the thread once it is free (never, if a call was left behind)."""
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None

    __del__ = close


def _work(jobs: queue.SimpleQueue) -> None:
    while (job := jobs.get()) is not None:
        _run(*job)
        del job  # while it waits for the next, nothing of the last (its owner may be collected)


def _run(future: Future, fn: Callable[..., Any], args: tuple) -> None:
    try:
        future.set_result(fn(*args))
    except BaseException as error:  # noqa: BLE001 - handed to the caller
        future.set_exception(error)
