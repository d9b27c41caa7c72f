"""The keyed context: what a hook sees of one key while the executor runs it.

One `KeyedContext` object serves every hook call of an executor; `_bind` points it at the next
key (the per-record hot path, so it only sets a few slots). Everything a hook does goes through
it and stays undoable until the call returns:

- state: the key's document is the live dict from the executor's `KeyedState` cache; the first
  access in a call takes a copy of it (plain JSON-shaped data, so a small recursive copy, far
  cheaper than `copy.deepcopy`) to put back if the hook raises;
- timers: the first change to a (key, tag) in a call remembers what was there before;
- productions: captured (copied) when produced, buffered, and handed to the collector only
  when the hook returns normally, with deterministic ids
  (`mmh3.hash128("<pipeline>.<computation>|<cause>|<n>")`, cause = the input record's id or
  `timer|key|tag|time`), so a hook re-run after an aborted commit produces the same ids and
  downstream deduplication can drop the repeats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mmh3

from framework.api import DOMAINS, EVENT, Timer

if TYPE_CHECKING:
    from framework.executor import Executor

_ATOMS = frozenset((str, int, float, bool, type(None)))


def copy_json(value: Any) -> Any:
    """Deep copy of JSON-shaped data (dicts and lists of scalars); other objects are shared.

    About 5x faster than `copy.deepcopy` on small documents, which matters because it runs
    once per hook call that touches state.
    """
    kind = type(value)
    if kind is dict:
        return {k: (v if type(v) in _ATOMS else copy_json(v)) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else copy_json(v) for v in value]
    return value


def production_id(computation: str, cause: str, n: int) -> str:
    """Deterministic id of the `n`-th production of the hook call caused by `cause`."""
    # the hex of hash128 as a big-endian integer, without the int round trip
    return mmh3.hash_bytes(f"{computation}|{cause}|{n}")[::-1].hex()


_UNTOUCHED = object()


class KeyedContext:
    """`framework.api.Context` for one key at a time, rebound by the executor per hook call."""

    __slots__ = (
        "_executor",
        "_states",
        "_timers",
        "_outputs",
        "_name",
        "_key",
        "_timestamp",
        "_cause",
        "_doc",
        "_snapshot",
        "_timer_undo",
        "_productions",
    )

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._states = executor.state
        self._timers = executor.timers
        self._outputs = frozenset(executor.spec.outputs)
        self._name = executor.spec.group
        self._key = ""
        self._timestamp = 0
        self._cause = ""
        self._doc: dict | None = None
        self._snapshot: Any = _UNTOUCHED
        self._timer_undo: dict[str, Timer | None] = {}
        self._productions: list[tuple[str, str, Any, int]] = []

    # -- the executor's side --------------------------------------------------------------

    def _bind(self, key: str, timestamp: int, cause: str) -> None:
        """Point the context at the next hook call (the per-record hot path)."""
        self._key = key
        self._timestamp = timestamp
        self._cause = cause
        self._doc = None

    def _finish(self) -> None:
        """The hook returned: hand its productions to the collector, forget the undo data."""
        if self._productions:
            produce = self._executor.collector.produce
            name, cause = self._name, self._cause
            productions, self._productions = self._productions, []
            for n, (stream, key, value, timestamp) in enumerate(productions):
                produce(stream, key, value, timestamp, production_id(name, cause, n))
        if self._doc is not None:
            self._snapshot = _UNTOUCHED
            self._doc = None
        if self._timer_undo:
            self._timer_undo = {}

    def _abort(self) -> None:
        """The hook raised: drop its productions, put state and timers back as they were."""
        self._productions = []
        if self._doc is not None:
            self._states.restore(self._key, self._snapshot)
            self._snapshot = _UNTOUCHED
            self._doc = None
        if self._timer_undo:
            timers, key = self._timers, self._key
            for tag, before in self._timer_undo.items():
                if before is None:
                    timers.cancel(key, tag)
                else:
                    timers.set(key, before)
            self._timer_undo = {}

    # -- the hook's side (framework.api.Context) --------------------------------------------

    @property
    def key(self) -> str:
        return self._key

    @property
    def state(self) -> dict[str, Any]:
        doc = self._doc
        if doc is None:
            doc = self._doc = self._states.get(self._key)
            # An empty document needs no copy: rolling back to "empty" is doc.clear().
            self._snapshot = copy_json(doc) if doc else None
        return doc

    @property
    def low_watermark(self) -> int:
        return self._executor.input_watermark

    @property
    def processing_time(self) -> int:
        return self._executor.clock()

    def produce(
        self, stream: str, value: Any, *, key: str | None = None, timestamp: int | None = None
    ) -> None:
        """Emit `value` on `stream` once the hook returns; key and timestamp default to the
        key being processed and the input's timestamp (the timer's time in process_timer)."""
        if stream not in self._outputs:
            raise ValueError(
                f"computation {self._name!r} produced to {stream!r}, which is not among its "
                f"declared outputs {sorted(self._outputs)}: add it to outputs={{...}} in "
                "pipeline.computation(...)"
            )
        if key is None:
            key = self._key
        elif type(key) is not str:
            raise TypeError(f"produce(key=...) must be a str, got {type(key).__name__}")
        if timestamp is None:
            timestamp = self._timestamp
        elif not isinstance(timestamp, int):
            raise TypeError(
                f"produce(timestamp=...) must be int milliseconds, got {type(timestamp).__name__}"
            )
        # Buffered until the hook returns, so capture the value as it is now: a hook may go on
        # to mutate what it produced (e.g. a dict that lives in its state).
        self._productions.append((stream, key, copy_json(value), timestamp))

    def set_timer(self, tag: str, time: int, domain: str = EVENT) -> None:
        """Set this key's timer `tag` to fire at `time` in `domain`; setting it again moves it."""
        if domain not in DOMAINS:
            raise ValueError(f"timer domain {domain!r}: use 'event' or 'processing'")
        if not isinstance(time, int):
            raise TypeError(f"timer time must be int milliseconds, got {type(time).__name__}")
        if type(tag) is not str:
            raise TypeError(f"timer tag must be a str, got {type(tag).__name__}")
        timers, key = self._timers, self._key
        before = timers.get(key, tag)
        if before is not None and before.time == time and before.domain == domain:
            return
        if tag not in self._timer_undo:
            self._timer_undo[tag] = before
        timers.set(key, Timer(time, tag, domain))

    def cancel_timer(self, tag: str) -> None:
        """Cancel this key's timer `tag`, if it is set."""
        timers, key = self._timers, self._key
        before = timers.get(key, tag)
        if before is None:
            return
        if tag not in self._timer_undo:
            self._timer_undo[tag] = before
        timers.cancel(key, tag)

    def __repr__(self) -> str:
        return f"KeyedContext(computation={self._name!r}, key={self._key!r})"
