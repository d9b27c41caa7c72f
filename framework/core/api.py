"""The user's view of logwheel: records, timers, computations and the keyed context.

A computation sees one key at a time through a `Context` (as in Flink's KeyedProcessFunction):
its state, its timers and a way to produce. Everything behind the context — stores, journals,
transactions — is the runtime's business.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

MIN_TIME = -(2**63)
"""The low watermark before any is known."""

EVENT = "event"
PROCESSING = "processing"
DOMAINS = (EVENT, PROCESSING)


@dataclass(frozen=True, slots=True)
class Record:
    """A `(key, value, timestamp)` triple from a stream, plus its unique id."""

    key: str
    value: Any
    timestamp: int
    stream: str = ""
    id: str = ""


def _record_factory() -> Callable[[str, Any, int, str, str], Record]:
    new = object.__new__
    setters = [Record.__dict__[f].__set__ for f in ("key", "value", "timestamp", "stream", "id")]
    set_key, set_value, set_timestamp, set_stream, set_id = setters

    def make_record(key: str, value: Any, timestamp: int, stream: str, id: str) -> Record:
        record = new(Record)
        set_key(record, key)
        set_value(record, value)
        set_timestamp(record, timestamp)
        set_stream(record, stream)
        set_id(record, id)
        return record

    return make_record


make_record = _record_factory()
"""`Record(key, value, timestamp, stream, id)` for the per-record path: the same object, built
through the slots directly instead of the frozen dataclass's `object.__setattr__` per field
(0.5 -> 0.3 us a record)."""


@dataclass(frozen=True, slots=True, order=True)
class Timer:
    """A per-key hook that fires at `time` in its `domain` ("event" or "processing")."""

    time: int
    tag: str
    domain: str = EVENT


class Context(Protocol):
    """What a hook may touch: one key's state, its timers, and productions."""

    @property
    def key(self) -> str: ...

    @property
    def state(self) -> MutableMapping[str, Any]: ...

    @property
    def low_watermark(self) -> int: ...

    @property
    def processing_time(self) -> int: ...

    def produce(
        self, stream: str, value: Any, *, key: str | None = None, timestamp: int | None = None
    ) -> None: ...

    def set_timer(self, tag: str, time: int, domain: str = EVENT) -> None: ...

    def cancel_timer(self, tag: str) -> None: ...


class Computation:
    """Base class of user computations.

    Calls for one key never run concurrently; everything a hook does commits atomically.
    """

    state_schema: str | None = None
    """Full name of an Avro record type in `schemas/` for this computation's state, or None
    for JSON documents."""

    judges_lateness: bool = False
    """Whether it judges lateness itself: the executor then hands it records behind the input
    low watermark too, and it raises `LateRecord` for those it finds late (a window takes a
    record within its grace; a join one whose window is still open)."""

    vouches_state: bool = False
    """Whether it vouches for its state documents: it checks each value it keeps, says how
    much it adds (`ctx.state_grows`) and changes nothing in a call that fails, so its
    documents are encoded once per commit instead of after every call (the keyed state
    cache, framework/core/keyed_state.py)."""

    def process_record(self, ctx: Context, record: Record) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement process_record")

    def process_timer(self, ctx: Context, timer: Timer) -> None:
        """Called when a timer set with `ctx.set_timer` fires."""

    def on_late_record(self, ctx: Context, record: Record) -> None:
        """Called for a record whose timestamp is below the input low watermark on arrival.

        The default drops it; the runtime counts it either way."""

    def queried_state(self, state: Any) -> Any:
        """What a query of a key's state answers (`logwheel run --serve`: the `value` of
        `GET /state/<computation>/<key>`), given the key's committed state document. The
        default answers the document as it is; a computation whose state is internal
        bookkeeping (windows, joins) answers it in a documented shape."""
        return state
