"""Calls into librdkafka that may block past their own timeout, made in a thread of their own so
that the caller can stop waiting and leave them behind.

librdkafka's transactional calls to a coordinator do not always honour their timeout: asked
again after a time-out, `send_offsets_to_transaction` blocked for minutes once the group
coordinator's broker had been killed or restarted, and its process stopped polling until the
group expelled it (confluentinc/librdkafka#5456: a coordinator request's deadline is never
checked; #5511). The caller gives such a client up and makes new ones. A call left behind is
logged with its name and counted (`logwheel_stuck_calls_total`).

Where each call of the streaming path that can block is bounded:

- transactional (`init_transactions`, `send_offsets_to_transaction`, `commit_transaction`,
  `abort_transaction`), an at-least-once commit's synchronous `commit`, and the group
  consumer's `close` (it waits for the group's coordinator): here, left behind past their
  timeout plus a margin (streaming/committer.py, streaming/membership.py); the injector's
  transactional calls too (streaming/injector.py);
- the readers' `close` (channels, restorer, tables): here, left behind without ending anything;
- `poll`, `consume` and `flush` (confluent-kafka ends them at their timeout, in 200 ms steps
  that a signal interrupts), `committed`, `get_watermark_offsets`, `offsets_for_times` and
  `list_topics` (their timeouts are kept by the calling thread) and admin requests (a
  `request_timeout`, and a bound on every wait for their futures): their own timeouts;
- anything else, or any of these past its bound: the watchdog (streaming/watchdog.py) sees the
  main thread make no progress, interrupts it and, failing that, starts the process again.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from framework.core.metrics import STUCK_CALLS
from framework.errors import Rejoin

log = logging.getLogger(__name__)


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

    def __init__(self, name: str, computation: str = "") -> None:
        self.name = name
        self.computation = computation or name  # what `logwheel_stuck_calls_total` names
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
            self.stuck = call_name(fn)
            STUCK_CALLS.labels(self.computation, self.stuck).inc()
            log.error(
                "%s: %s has not returned after %g s: left behind", self.name, self.stuck, wait
            )
            raise LeftBehind(f"{self.stuck} has not returned after {wait:g} s") from None

    def close(self) -> None:
        """End the thread once it is free (never, if a call was left behind)."""
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None

    __del__ = close


def bounded(fn: Callable[..., Any], *args: Any, wait: float, name: str, computation: str) -> Any:
    """`fn(*args)` in a thread of its own, waited for at most `wait` s (`LeftBehind` past it):
    for calls made once (a client's close), each of which may be left behind alone."""
    calls = BoundedCalls(name, computation)
    try:
        return calls.call(fn, *args, wait=wait)
    finally:
        calls.close()


def call_name(fn: Callable[..., Any]) -> str:
    """The name a call is logged and counted by (a partial's function's)."""
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", repr(fn))


def _work(jobs: queue.SimpleQueue) -> None:
    while (job := jobs.get()) is not None:
        _run(*job)
        del job  # while it waits for the next, nothing of the last (its owner may be collected)


def _run(future: Future, fn: Callable[..., Any], args: tuple) -> None:
    try:
        future.set_result(fn(*args))
    except BaseException as error:  # noqa: BLE001 - handed to the caller
        future.set_exception(error)
    except:  # noqa: E722 - a bare KafkaError, no BaseException (a consumer's close raises one)
        raised = sys.exc_info()[1]
        if isinstance(raised, KafkaError):
            future.set_exception(KafkaException(raised))
        else:
            future.set_exception(RuntimeError(repr(raised)))
