"""The executor: runs one computation's hooks for the keys of one task, in any runtime.

`Harness`, the Kafka task and the Spark backfill all drive this same code — process a key's
records, fire its timers as the watermark (or the clock) passes them — which is what makes
their outputs agree. It knows nothing of Kafka, RocksDB or Spark: committed state
and timers come from small backend protocols, productions and dead letters go to an `Output`,
and the driver decides when changes are durable (`changes()` ... `committed()`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import SimpleNamespace
from typing import Any, Protocol

from framework.core.api import EVENT, MIN_TIME, PROCESSING, Computation, Record, Timer
from framework.core.clock import now_ms
from framework.core.context import KeyedContext, Output, production_id
from framework.core.dedup import IdBackend, SeenIds
from framework.core.keyed_state import KeyedState, StateBackend
from framework.core.metrics import (
    DEDUP_EXPIRED,
    DUPLICATES,
    LATE_RECORDS,
    PERCENTILE_LATE_RECORDS,
)
from framework.core.pipeline import ComputationSpec
from framework.core.timers import TimerService
from framework.errors import BadRecord, LateRecord, Retry, UsageError
from framework.serde.catalogue import decoder_for, encoder_for
from framework.serde.json_codec import encode_json_vetted


class TimerBackend(Protocol):
    def load_all(self) -> Iterable[tuple[str, Timer]]:
        """Every committed pending timer, as (key, timer)."""


class Executor:
    """Runs one computation's hooks: records in arrival order, timers as they come due.

    The driver feeds `process(record)` (record.key already the routing key), moves the input
    watermark with `advance_watermark`, calls `fire_due()` for processing-time timers, and
    publishes `output_watermark()`. A computation with a `Percentile` low watermark has two:
    `input_watermark`, the one it fires on (timers, lateness, ctx.low_watermark), and
    `strict_watermark`, the minimum over every input, which alone bounds what it publishes.

    A hook call that raises, or whose productions or state cannot be stored, is dead-lettered
    with its state and timer changes undone and its productions dropped; processing goes on.
    A `Retry` (something the hook needs is away, such as the registry behind a table) undoes
    the call's effects and goes up to the driver, which runs the record again later: it is not
    the record's fault.
    """

    def __init__(
        self,
        spec: ComputationSpec,
        state: StateBackend,
        timers: TimerBackend,
        output: Output,
        *,
        clock: Callable[[], int] = now_ms,
        cache_size: int = 10_000,
        state_max_bytes: int | None = None,
        tables: Mapping[str, Any] | None = None,
        ids: IdBackend | None = None,
        calls: Any = None,
        screen_timer: Callable[[str, Timer], bool] | None = None,
    ) -> None:
        self.spec = spec
        # `calls.calling` names the timer whose hook runs, for a watchdog (streaming/calls.py);
        # `screen_timer(key, timer)` True: the driver dealt with that firing (dead-lettered it)
        self.calls = SimpleNamespace(calling=None) if calls is None else calls
        self.screen_timer = screen_timer
        self.computation: Computation = spec.factory()
        self.output = output
        self.clock = clock
        self.input_watermark: int = MIN_TIME
        self.strict_watermark: int = MIN_TIME
        self.late_records = 0
        self._replaying = False  # running a replayed dead letter: never late
        self.percentile_late = 0  # late by input_watermark, on time by strict_watermark
        self._percentile = spec.low_watermark is not None
        self._state = KeyedState(
            state,
            encoder_for(spec.state_schema),
            decoder_for(spec.state_schema),
            capacity=cache_size,
            max_bytes=state_max_bytes,
            encode_vetted=encode_json_vetted if spec.state_schema is None else None,
        )
        self._timers = TimerService(timers.load_all())
        # a computation that vouches for its documents (checks what it adds, changes nothing
        # in a call that fails) has them encoded once per commit, not per call (keyed_state.py)
        vouched = type(self.computation).vouches_state
        self._ctx = KeyedContext(
            self,
            self._state,
            self._timers,
            output,
            spec.group,
            frozenset(spec.outputs),
            tables,
            vouched=vouched,
        )
        self._late_metric = LATE_RECORDS.labels(spec.name)
        self._percentile_metric = PERCENTILE_LATE_RECORDS.labels(spec.name)
        # record-id deduplication (MillWheel §5.3): `ids` holds the committed ids of a
        # computation declared with dedup=Dedup(...)
        self.duplicates = 0
        self.ids: SeenIds | None = None
        if spec.dedup is not None:
            if ids is None:
                raise UsageError(f"computation {spec.name!r} deduplicates: give the executor ids=")
            self.ids = SeenIds(spec.dedup, ids)
        else:
            self.process = self._run  # type: ignore[method-assign] # no dedup, no extra step
        self._duplicates_metric = DUPLICATES.labels(spec.name)
        self._id_of = None if spec.dedup is None else spec.dedup.id
        cls = type(self.computation)
        self._process_record = self.computation.process_record
        self._on_late = (
            None
            if cls.on_late_record is Computation.on_late_record
            else self.computation.on_late_record
        )
        # a computation that judges lateness itself (windows: within grace is on time) sees
        # every record, and raises LateRecord for those it finds late
        self._judges_lateness = cls.judges_lateness

    @property
    def state(self) -> KeyedState:
        return self._state

    @property
    def timers(self) -> TimerService:
        return self._timers

    def process(self, record: Record, source: Any = None) -> None:
        """Run the record's hook: process_record, or on_late_record if it is late; with
        dedup, not when its id was already seen for its key. `source` is the driver's own
        handle of where the record was read (a Kafka message), handed to the output with
        the record if it becomes a dead letter."""
        rid = record.id  # the default: Dedup.id_of without its call
        if self._id_of is not None or type(rid) is not str or not rid:
            try:
                rid = self.spec.dedup.id_of(record)
            except Exception as error:  # the id callable's own error, or none found
                if not isinstance(error, BadRecord):
                    error = BadRecord("dedup", f"no record id: {error}", error)
                self.output.dead_letter(record, error, "dedup", source)
                return
        ids = self.ids
        if record.timestamp < ids.collected_before:
            DEDUP_EXPIRED.labels(self.spec.name).inc()  # its id may be gone: unchecked
            self._run(record, source)
            return
        h = ids.first_seen(record.key, rid)
        if h is None:
            self.duplicates += 1
            self._duplicates_metric.inc()
            return
        self._run(record, source)  # a Retry goes up before the id is remembered: it runs again
        ids.remember(record.key, rid, h, record.timestamp)

    def process_replayed(self, record: Record, source: Any = None) -> None:
        """Run the hook of a dead letter sent back by `logwheel dlq replay`: as `process`,
        except that it is never late (its time may lie far behind the watermark: it is
        processed, not dropped) and never a duplicate (the replay topic carries each dead
        letter once, and its id was seen when it first failed). A computation that judges
        lateness itself (windows) still does: a window that closed stays closed."""
        self._replaying = True
        try:
            self._run(record, source)
        finally:
            self._replaying = False

    def _run(self, record: Record, source: Any = None) -> None:
        """`process` past its dedup step (all of it without dedup)."""
        if (
            record.timestamp < self.input_watermark
            and not self._judges_lateness
            and not self._replaying
        ):
            if self._on_late is None:
                self._late(record, None, source)
                return
            self._count_late(record.timestamp + 1)
            hook, stage = self._on_late, "on_late_record"
        else:
            hook, stage = self._process_record, "process_record"
        ctx = self._ctx
        ctx._bind(record.key, record.timestamp, record.id)
        try:
            hook(ctx, record)
            ctx._finish()
        except LateRecord as error:
            ctx._abort()
            self._late(record, error, source)
        except Retry:  # the record is fine, something it needs is away (a table's registry)
            ctx._abort()
            raise
        except BadRecord as error:
            ctx._abort()
            self.output.dead_letter(record, error, error.stage, source)
        except Exception as error:
            ctx._abort()
            self.output.dead_letter(record, error, stage, source)
        except BaseException:
            ctx._abort()
            raise

    def _count_late(self, closes: int) -> None:
        """Count a late record; `closes` is the lowest watermark it is late by: one the strict
        watermark has not reached makes it late only because of the percentile."""
        self.late_records += 1
        self._late_metric.inc()
        if self._percentile and closes > self.strict_watermark:
            self.percentile_late += 1
            self._percentile_metric.inc()

    def _late(self, record: Record, error: LateRecord | None, source: Any) -> None:
        """Count a late record and drop it, or dead-letter it (`on_late="dead_letter"`)."""
        closes = error.closes if error is not None and error.closes is not None else None
        self._count_late(record.timestamp + 1 if closes is None else closes)
        if self.spec.on_late == "dead_letter":
            if error is None:
                error = LateRecord(
                    f"record at {record.timestamp} came behind the input low watermark "
                    f"{self.input_watermark}"
                )
            self.output.dead_letter(record, error, error.stage, source)

    def advance_watermark(self, w: int, strict: int | None = None) -> int:
        """Raise the input low watermark to `w` and the strict one to `strict` (default `w`; a
        lower value is ignored: both are monotone), then fire what is due; returns how many
        timers fired."""
        if w > self.input_watermark:
            self.input_watermark = w
            if self.ids is not None:
                self.ids.collect(w)
        strict = w if strict is None else strict
        if strict > self.strict_watermark:
            self.strict_watermark = strict
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
        """Bound on the timestamps of this computation's future output: min(strict input
        watermark, earliest pending event-time timer), less the spec's hold."""
        strict = self.strict_watermark if self._percentile else self.input_watermark
        return self.spec.output_watermark(strict, self._timers.earliest(EVENT))

    def next_processing_timer(self) -> int | None:
        """When the earliest processing-time timer is due, None if there is none."""
        return self._timers.earliest(PROCESSING)

    def _fire(self, key: str, timer: Timer) -> None:
        if self.screen_timer is not None and self.screen_timer(key, timer):
            return
        ctx, calls = self._ctx, self.calls
        ctx._bind(key, timer.time, f"timer|{key}|{timer.tag}|{timer.time}")
        calls.calling = (key, timer)
        try:
            self.computation.process_timer(ctx, timer)
            ctx._finish()
        except Retry:
            ctx._abort()
            raise
        except Exception as error:
            ctx._abort()
            stage = error.stage if isinstance(error, BadRecord) else "process_timer"
            self.output.dead_letter(self.timer_record(key, timer), error, stage)
        except BaseException:
            ctx._abort()
            raise
        finally:
            calls.calling = None

    def timer_record(self, key: str, timer: Timer) -> Record:
        """What a timer's dead letter carries: it has no input record."""
        cause = f"timer|{key}|{timer.tag}|{timer.time}"
        return Record(
            key,
            {"timer": timer.tag, "time": timer.time, "domain": timer.domain},
            timer.time,
            "<timer>",
            production_id(self.spec.group, cause, -1),
        )
