"""The executor: runs one computation's hooks for the keys of one task, in any runtime.

`Harness`, the Kafka task and the Spark backfill all drive this same code — process a key's
records, fire its timers as the watermark (or the clock) passes them — which is what makes
their outputs agree (DESIGN.md). It knows nothing of Kafka, RocksDB or Spark: committed state
and timers come from small backend protocols, productions and dead letters go to a collector,
and the driver decides when changes are durable (`changes()` ... `committed()`).
"""

from __future__ import annotations

import heapq
import itertools
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import Counter

from framework.api import EVENT, MIN_TIME, PROCESSING, Computation, Record, Timer
from framework.context import KeyedContext, production_id
from framework.pipeline import ComputationSpec

LATE_RECORDS = Counter(
    "logwheel_late_records",
    "Records that arrived behind the input low watermark (handed to on_late_record).",
    ["computation"],
)


class StateBackend(Protocol):
    def load(self, key: str) -> dict | None:
        """The committed document of `key`, None if it has none."""


class TimerBackend(Protocol):
    def load_all(self) -> Iterable[tuple[str, Timer]]:
        """Every committed pending timer, as (key, timer)."""


class Collector(Protocol):
    def produce(self, stream: str, key: str, value: Any, timestamp: int, record_id: str) -> None:
        """Emit one production of a hook that returned normally."""

    def dead_letter(self, record: Record, error: BaseException, stage: str) -> None:
        """`record` failed in `stage`: "process_record", "process_timer", "on_late_record"
        or "key" (the input's key extractor)."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


canonical_json: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
).encode
"""The form state documents are compared in: sorted keys, no spaces (one prebuilt encoder:
`json.dumps` with options builds a new one per call)."""


class KeyedState:
    """Write-back cache of state documents in front of a `StateBackend` (MillWheel §8.3).

    `get` hands out the live dict of a key (loading it on first use); the driver asks for
    `changes()` — keys whose document differs from the committed one — writes them durably,
    then calls `committed()`. Clean documents of the least recently used keys are evicted past
    `capacity`; a dirty one never is before it is committed.
    """

    def __init__(self, backend: StateBackend, capacity: int = 10_000) -> None:
        self._backend = backend
        self.capacity = capacity
        self._cache: OrderedDict[str, dict] = OrderedDict()
        self._committed: dict[str, str | None] = {}  # canonical JSON of committed docs
        self._touched: dict[str, None] = {}  # since the last changes()
        self._reported: dict[str, str | None] = {}  # by the last changes(), not yet committed

    def get(self, key: str) -> dict:
        """The live document of `key` ({} if it has none); marks the key touched."""
        self._touched[key] = None  # first: a touched key is never evicted by its own load
        cache = self._cache
        doc = cache.get(key)
        if doc is None:
            return self._load(key)
        cache.move_to_end(key)
        return doc

    def peek(self, key: str) -> dict | None:
        """The current document of `key` without touching it or filling the cache."""
        doc = self._cache.get(key)
        if doc is None:
            doc = self._backend.load(key)
        return doc or None

    def restore(self, key: str, doc: dict | None) -> None:
        """Put back a document as it was before a failed hook call (None: empty)."""
        self._cache[key] = {} if doc is None else doc

    def changes(self) -> list[tuple[str, dict | None]]:
        """Touched keys whose document differs from the committed one: (key, doc), with None
        for a document that is now empty (delete it). The docs are the live ones: serialize
        them before running another hook."""
        reported = self._reported
        for key in self._touched:
            reported[key] = None
        self._touched = {}
        out: list[tuple[str, dict | None]] = []
        committed = self._committed
        for key in reported:
            doc = self._cache[key]
            try:
                now = canonical_json(doc) if doc else None
            except (TypeError, ValueError) as error:
                raise TypeError(
                    f"state of key {key!r} is not JSON-compatible ({error}): keep str keys and "
                    "str/int/float/bool/None/list/dict values in ctx.state"
                ) from error
            reported[key] = now
            if now != committed.get(key):
                out.append((key, doc if doc else None))
        return out

    def committed(self) -> None:
        """What the last `changes()` returned is durable: it becomes the baseline. Keys touched
        after that call stay dirty."""
        self._committed.update(self._reported)
        self._reported = {}
        if len(self._cache) > self.capacity:
            self._evict()

    def evict_clean(self) -> None:
        """Forget every clean cached document, so the next `get` reloads it from the backend
        (what a restart would see)."""
        for key in [k for k in self._cache if k not in self._touched and k not in self._reported]:
            del self._cache[key]
            self._committed.pop(key, None)

    def __len__(self) -> int:
        return len(self._cache)

    def _load(self, key: str) -> dict:
        doc = self._backend.load(key)
        if doc is None:
            doc = {}
        elif not isinstance(doc, dict):
            raise TypeError(f"state backend returned {type(doc).__name__} for key {key!r}")
        self._committed[key] = canonical_json(doc) if doc else None
        self._cache[key] = doc
        if len(self._cache) > self.capacity:
            self._evict()
        return doc

    def _evict(self) -> None:
        excess = len(self._cache) - self.capacity
        victims = []
        for key in self._cache:  # least recently used first
            if len(victims) >= excess:
                break
            if key not in self._touched and key not in self._reported:
                victims.append(key)
        for key in victims:
            del self._cache[key]
            self._committed.pop(key, None)


class TimerService:
    """All pending timers of one task, both domains: one per (key, tag).

    One heap per domain ordered by (time, key, tag), with lazy deletion: an entry is live only
    while its sequence number is the one recorded for its (key, tag), so set, cancel and pop
    are O(log n). `changes()` reports (key, tag, timer or None) against the committed view.
    """

    def __init__(self, pending: Iterable[tuple[str, Timer]] = ()) -> None:
        self._live: dict[tuple[str, str], tuple[Timer, int]] = {}
        self._heaps: dict[str, list[tuple[int, str, str, int]]] = {EVENT: [], PROCESSING: []}
        self._seq = itertools.count()
        self._baseline: dict[tuple[str, str], Timer | None] = {}  # committed values of changed
        self._reported: dict[tuple[str, str], Timer | None] = {}
        for key, timer in pending:
            seq = next(self._seq)
            self._live[(key, timer.tag)] = (timer, seq)
            self._heaps[timer.domain].append((timer.time, key, timer.tag, seq))
        for heap in self._heaps.values():
            heapq.heapify(heap)

    def get(self, key: str, tag: str) -> Timer | None:
        entry = self._live.get((key, tag))
        return None if entry is None else entry[0]

    def set(self, key: str, timer: Timer) -> None:
        """Set (or move) the timer `timer.tag` of `key`."""
        slot = (key, timer.tag)
        entry = self._live.get(slot)
        if entry is not None and entry[0] == timer:
            return
        if slot not in self._baseline:
            self._baseline[slot] = None if entry is None else entry[0]
        seq = next(self._seq)
        self._live[slot] = (timer, seq)
        heapq.heappush(self._heaps[timer.domain], (timer.time, key, timer.tag, seq))
        if len(self._heaps[timer.domain]) > 2 * len(self._live) + 64:
            self._compact()

    def cancel(self, key: str, tag: str) -> None:
        slot = (key, tag)
        entry = self._live.pop(slot, None)
        if entry is not None and slot not in self._baseline:
            self._baseline[slot] = entry[0]

    def earliest(self, domain: str) -> int | None:
        """Time of the earliest pending timer of `domain`, None if there is none."""
        heap, live = self._heaps[domain], self._live
        while heap:
            t, key, tag, seq = heap[0]
            entry = live.get((key, tag))
            if entry is not None and entry[1] == seq:
                return t
            heapq.heappop(heap)
        return None

    def pop_due(self, domain: str, until: int) -> tuple[str, Timer] | None:
        """Remove and return the earliest timer of `domain` with time <= `until` (ties by key,
        then tag), or None. A popped timer counts as deleted."""
        t = self.earliest(domain)
        if t is None or t > until:
            return None
        _, key, tag, _ = heapq.heappop(self._heaps[domain])
        slot = (key, tag)
        timer = self._live.pop(slot)[0]
        if slot not in self._baseline:
            self._baseline[slot] = timer
        return key, timer

    def changes(self) -> list[tuple[str, str, Timer | None]]:
        """(key, tag, timer) whose pending timer differs from the committed one since the last
        `committed()`; None means deleted (cancelled or fired)."""
        out = []
        for slot, before in self._baseline.items():
            entry = self._live.get(slot)
            now = None if entry is None else entry[0]
            self._reported[slot] = now
            if now != before:
                out.append((slot[0], slot[1], now))
        return out

    def committed(self) -> None:
        """What the last `changes()` returned is durable; later changes stay pending."""
        for slot, value in self._reported.items():
            entry = self._live.get(slot)
            if (None if entry is None else entry[0]) == value:
                del self._baseline[slot]
            else:
                self._baseline[slot] = value
        self._reported = {}

    def pending(self) -> Iterator[tuple[str, Timer]]:
        """Every pending timer as (key, timer), in no particular order."""
        for (key, _), (timer, _) in self._live.items():
            yield key, timer

    def __len__(self) -> int:
        return len(self._live)

    def _compact(self) -> None:
        for domain in self._heaps:
            self._heaps[domain] = []
        for (key, tag), (timer, seq) in self._live.items():
            self._heaps[timer.domain].append((timer.time, key, tag, seq))
        for heap in self._heaps.values():
            heapq.heapify(heap)


class Executor:
    """Runs one computation's hooks: records in arrival order, timers as they come due.

    The driver feeds `process(record)` (record.key already the routing key), moves the input
    watermark with `advance_watermark`, calls `fire_due()` for processing-time timers, and
    publishes `output_watermark()`. A hook that raises is dead-lettered with its state and
    timer changes undone and its productions dropped; processing goes on.
    """

    def __init__(
        self,
        spec: ComputationSpec,
        state: StateBackend,
        timers: TimerBackend,
        collector: Collector,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        cache_size: int = 10_000,
    ) -> None:
        self.spec = spec
        self.computation: Computation = spec.factory()
        self.collector = collector
        self.clock = clock
        self.input_watermark: int = MIN_TIME
        self.late_records = 0
        self._state = KeyedState(state, cache_size)
        self._timers = TimerService(timers.load_all())
        self._ctx = KeyedContext(self)
        self._late_metric = LATE_RECORDS.labels(spec.name)
        cls = type(self.computation)
        self._process_record = self.computation.process_record
        self._on_late = (
            None
            if cls.on_late_record is Computation.on_late_record
            else self.computation.on_late_record
        )

    @property
    def state(self) -> KeyedState:
        return self._state

    @property
    def timers(self) -> TimerService:
        return self._timers

    def process(self, record: Record) -> None:
        """Run the record's hook: process_record, or on_late_record if it is late."""
        if record.timestamp < self.input_watermark:
            self.late_records += 1
            self._late_metric.inc()
            if self._on_late is None:
                return
            hook, stage = self._on_late, "on_late_record"
        else:
            hook, stage = self._process_record, "process_record"
        ctx = self._ctx
        ctx._bind(record.key, record.timestamp, record.id)
        try:
            hook(ctx, record)
            ctx._finish()
        except Exception as error:
            ctx._abort()
            self.collector.dead_letter(record, error, stage)
        except BaseException:
            ctx._abort()
            raise

    def advance_watermark(self, w: int) -> int:
        """Raise the input low watermark to `w` (a lower `w` is ignored: it is monotone), then
        fire what is due; returns how many timers fired."""
        if w > self.input_watermark:
            self.input_watermark = w
        return self.fire_due()

    def fire_due(self) -> int:
        """Fire event-time timers <= the input watermark and processing-time timers <= the
        clock, earliest first (event before processing on a tie), until none is due — a
        firing may set timers that are due at once. Returns how many fired."""
        timers = self._timers
        fired = 0
        now = None
        while True:
            event = timers.earliest(EVENT)
            if event is not None and event > self.input_watermark:
                event = None
            proc = timers.earliest(PROCESSING)
            if proc is not None:
                if now is None or proc > now:
                    now = self.clock()
                if proc > now:
                    proc = None
            if event is not None and (proc is None or event <= proc):
                due = timers.pop_due(EVENT, event)
            elif proc is not None:
                due = timers.pop_due(PROCESSING, proc)
            else:
                return fired
            assert due is not None
            self._fire(*due)
            fired += 1

    def output_watermark(self) -> int:
        """Bound on the timestamps of this computation's future default-timestamped output:
        min(input watermark, earliest pending event-time timer)."""
        earliest = self._timers.earliest(EVENT)
        if earliest is None or earliest > self.input_watermark:
            return self.input_watermark
        return earliest

    def next_processing_timer(self) -> int | None:
        """When the earliest processing-time timer is due, None if there is none."""
        return self._timers.earliest(PROCESSING)

    def _fire(self, key: str, timer: Timer) -> None:
        cause = f"timer|{key}|{timer.tag}|{timer.time}"
        ctx = self._ctx
        ctx._bind(key, timer.time, cause)
        try:
            self.computation.process_timer(ctx, timer)
            ctx._finish()
        except Exception as error:
            ctx._abort()
            record = Record(
                key,
                {"timer": timer.tag, "time": timer.time, "domain": timer.domain},
                timer.time,
                "<timer>",
                production_id(self.spec.group, cause, -1),
            )
            self.collector.dead_letter(record, error, "process_timer")
        except BaseException:
            ctx._abort()
            raise
