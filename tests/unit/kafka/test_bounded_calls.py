"""Calls that may block past their own timeout, made in a thread that can be left behind."""

from __future__ import annotations

import gc
import threading

import pytest

from framework.errors import Rejoin
from framework.kafka.bounded_calls import BoundedCalls, LeftBehind


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_a_call_returns_or_raises_as_it_would_inline_and_the_thread_ends_with_its_owner():
    calls = BoundedCalls("first")
    assert not _threads("first")  # started by the first call only
    assert calls.call(lambda a, b: a + b, 2, 3, wait=5) == 5
    with pytest.raises(KeyError):
        calls.call({}.__getitem__, "missing", wait=5)
    assert calls.stuck is None
    thread = _threads("first")[0]
    del calls  # as a join that failed half-way leaves it, never closed: the runner collects it
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


def test_a_blocked_call_is_left_behind_and_later_calls_fail_at_once():
    """The blocked thread is a daemon (it never keeps the process from ending), and the caller
    hears that the client is unusable instead of queueing behind the blocked call: a `Rejoin`
    (new clients), still a `TimeoutError` for callers that wait on one."""
    calls, release = BoundedCalls("t"), threading.Event()

    def send_offsets_to_transaction():
        release.wait()

    with pytest.raises(LeftBehind, match="send_offsets_to_transaction has not returned") as left:
        calls.call(send_offsets_to_transaction, wait=0.2)
    assert isinstance(left.value, Rejoin) and isinstance(left.value, TimeoutError)
    assert calls.stuck == "send_offsets_to_transaction"
    assert all(t.daemon for t in _threads("t"))
    with pytest.raises(LeftBehind, match="send_offsets_to_transaction is still blocked"):
        calls.call(lambda: 1, wait=5)
    release.set()
    calls.close()
