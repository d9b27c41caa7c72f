"""The keyed context: what a hook sees of one key while the executor runs it.

One `KeyedContext` object serves every hook call of an executor; `_bind` points it at the next
key (the per-record hot path, so it only sets a few slots). A hook call is atomic at the hook:
everything it does stays undoable until it returns, and it counts as done only once all of it
is known to be storable (invariants 1 and 7):

- state: the key's document is the live dict from the `KeyedState` cache; when the call
  returns it is sealed (encoded, checked against the changelog's limit); a failed call puts
  back the last sealed form. A computation that vouches for its state (`vouches_state`: it
  checks what it adds and changes nothing in a call that fails) has it deferred instead
  (`KeyedState.defer`), encoded once per commit, and says what it adds (`state_grows`);
- timers: the first change to a (key, tag) in a call remembers what was there before;
- productions: encoded and checked by the output (schema, size, timestamp window) when produced,
  with deterministic ids (`mmh3.hash128("<pipeline>.<computation>|<cause>|<n>")`, cause = the
  input record's id or `timer|key|tag|time`), buffered, and handed on only once the hook
  returned and its state was sealed. A re-run after an aborted commit produces the same ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import mmh3

from framework.core.api import DOMAINS, EVENT, Record, Timer
from framework.core.keyed_state import KeyedState
from framework.core.timers import TimerService
from framework.errors import BadRecord, UsageError


class Output(Protocol):
    """Where an executor's productions and dead letters go (Kafka, memory, Spark)."""

    def encode(self, stream: str, key: str, value: Any, timestamp: int, record_id: str) -> Any:
        """Encode and check one production; raise `BadRecord` (stage "encode" or "produce")
        if the stream would refuse it. Returns what `produce` takes."""

    def produce_all(self, encoded: list[Any]) -> None:
        """Emit the productions of a hook call that completed, in order."""

    def dead_letter(
        self, record: Record | None, error: BaseException, stage: str, source: Any = None
    ) -> None:
        """`record` failed in `stage`: "decode", "key", "dedup", "process_record",
        "process_timer", "on_late_record", "late", "encode", "produce" or "state". `source`
        is what the driver handed `Executor.process` with it (None for a timer's firing);
        `record` is None for what the driver could not decode."""


class Scope(Protocol):
    """What the context reads from its driver besides state and timers."""

    input_watermark: int
    clock: Callable[[], int]


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


class KeyedContext:
    """`framework.core.api.Context` for one key at a time, rebound by the executor per hook call."""

    __slots__ = (
        "_scope",
        "_states",
        "_timers",
        "_output",
        "_outputs",
        "_name",
        "_key",
        "_timestamp",
        "_cause",
        "_doc",
        "_timer_undo",
        "_productions",
        "_tables",
        "_failure",
        "_vouched",
        "_added",
        "_strict",
    )

    def __init__(
        self,
        scope: Scope,
        states: KeyedState,
        timers: TimerService,
        output: Output,
        name: str,
        outputs: frozenset[str],
        tables: Mapping[str, Any] | None = None,
        vouched: bool = False,
    ) -> None:
        self._scope = scope
        self._states = states
        self._timers = timers
        self._output = output
        self._outputs = outputs
        self._name = name
        self._key = ""
        self._timestamp = 0
        self._cause = ""
        self._doc: dict | None = None
        self._timer_undo: dict[str, Timer | None] = {}
        self._productions: list[tuple[str, str, Any, int]] = []
        self._tables = dict(tables or {})
        self._failure: BaseException | None = None  # a production that failed in this call
        self._vouched = vouched  # the computation vouches for its state: defer, not seal
        self._added = 0  # encoded bytes the call said it adds to its deferred document
        self._strict = False  # the call seals after all: near the changelog's limit

    # -- the executor's side --------------------------------------------------------------

    def _bind(self, key: str, timestamp: int, cause: str) -> None:
        """Point the context at the next hook call (the per-record hot path)."""
        self._key = key
        self._timestamp = timestamp
        self._cause = cause
        self._doc = None
        self._added = 0
        self._strict = False

    def _finish(self) -> None:
        """The hook returned: seal its state, then hand its (already encoded and checked)
        productions on. Raises `BadRecord` if the state cannot be stored; the executor then
        undoes the call with `_abort`. A production that failed fails the call even if the
        hook caught the error: nothing a hook produced disappears unreported."""
        if self._failure is not None:
            raise self._failure
        if self._doc is not None:
            if self._vouched and not self._strict:
                self._states.defer(self._key, self._added)
            else:
                self._states.seal(self._key, self._doc)
            self._doc = None
        if self._productions:
            productions, self._productions = self._productions, []
            self._output.produce_all(productions)
        if self._timer_undo:
            self._timer_undo = {}

    def _abort(self) -> None:
        """The hook (or its completion) failed: drop its productions, put state and timers
        back as they were."""
        self._productions = []
        self._failure = None
        if self._doc is not None:
            self._states.rollback(self._key)
            self._doc = None
        if self._timer_undo:
            timers, key = self._timers, self._key
            for tag, before in self._timer_undo.items():
                if before is None:
                    timers.cancel(key, tag)
                else:
                    timers.set(key, before)
            self._timer_undo = {}

    # -- the hook's side (framework.core.api.Context) --------------------------------------------

    @property
    def key(self) -> str:
        return self._key

    @property
    def state(self) -> dict[str, Any]:
        doc = self._doc
        if doc is None:
            doc = self._doc = self._states.get(self._key)
        return doc

    def state_grows(self, added: int) -> None:
        """A hook of a computation that vouches for its state will add about `added` encoded
        bytes (at least as many as it adds) to the key's document, and has changed nothing
        yet in this call. Where that may pass the changelog's limit, the document is sealed
        now as it is, and again when the call returns (its exact size checked there, the call
        undone if it is over); elsewhere it stays deferred."""
        if not self._vouched or self._strict:
            return
        states, key, total = self._states, self._key, self._added + added
        if states.fits(key, total):
            self._added = total
        else:
            states.seal(key, self.state)
            self._strict = True

    @property
    def low_watermark(self) -> int:
        return self._scope.input_watermark

    @property
    def processing_time(self) -> int:
        return self._scope.clock()

    def produce(
        self, stream: str, value: Any, *, key: str | None = None, timestamp: int | None = None
    ) -> None:
        """Emit `value` on `stream` once the hook returns; key and timestamp default to the
        key being processed and the input's timestamp (the timer's time in process_timer)."""
        if stream not in self._outputs:
            raise UsageError(
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
        # Encoded now (which captures the value as it is: a hook may go on to mutate what it
        # produced) and handed on only when the hook returns; a production its stream would
        # refuse raises BadRecord here, failing the call at stage "encode" or "produce".
        productions = self._productions
        rid = production_id(self._name, self._cause, len(productions))
        try:
            productions.append(self._output.encode(stream, key, value, timestamp, rid))
        except BadRecord as error:
            self._failure = error
            raise

    def table(self, name: str) -> Any:
        """Read-only view (`get(key)`, `in`) of the declared table `name`, as of this call; a
        global table with history also answers `get(key, as_of=ms)`."""
        try:
            return self._tables[name]
        except KeyError:
            raise UsageError(
                f"computation {self._name!r} has no table {name!r}; it declares "
                f"{sorted(self._tables)}: add it to tables={{...}} (co-partitioned) or "
                "global_tables={...} in pipeline.computation(...)"
            ) from None

    def set_timer(self, tag: str, time: int, domain: str = EVENT) -> None:
        """Set this key's timer `tag` to fire at `time` in `domain`; setting it again moves it."""
        if domain not in DOMAINS:
            raise UsageError(f"timer domain {domain!r}: use 'event' or 'processing'")
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
