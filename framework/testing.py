"""`Harness`: one computation in process, synchronously, with no broker (README, "Writing a
job": testing without a broker).

It drives the same `Executor` as the Kafka task, with in-memory backends and collector, and
makes the same round trips the Kafka runtime makes: input and output values through the
streams' serde, state through the state serde at every commit (each call starts from state as
a restore from the changelog would see it). So what passes here behaves the same on Kafka.
The formats are the pipeline's own (`Pipeline(name, registry=URL)`; the Harness asks no
registry and reads no environment): a stream in the wire format with a schema round-trips
through Avro with that schema, which decodes to the same values; a source in it without one
(read as its writer wrote it on Kafka) is handed to the hook as given; an output in it without
one is refused as `logwheel run` refuses it.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

from framework.core.api import Record, Timer
from framework.core.clock import now_ms
from framework.core.context import copy_json, production_id
from framework.core.dead_letters import ErrorPolicy, reason_of
from framework.core.declarations import check_wire_schema
from framework.core.dedup import MemoryIdBackend
from framework.core.executor import Executor
from framework.core.future_records import future_error, future_limit, future_policy
from framework.core.global_tables import MemoryGlobalTable
from framework.core.keyed_state import MemoryStateBackend
from framework.core.percentile import percentile_watermark
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.core.timers import MemoryTimerBackend
from framework.errors import BadRecord, UsageError
from framework.serde.catalogue import decoder_for, encoder_for


class DeadLetter(NamedTuple):
    record: Record
    error: BaseException
    stage: str

    def describe(self) -> str:
        return reason_of(self.error)


class MemoryOutput:
    """Productions per stream (values round-tripped through the stream's serde) and dead
    letters, under the computation's error policy. A value its schema rejects fails its hook
    call at stage "encode", as on Kafka."""

    def __init__(self, spec: ComputationSpec, pipeline: Pipeline | None = None) -> None:
        self.outputs: dict[str, list[Record]] = {stream: [] for stream in spec.outputs}
        self._trips = {
            stream: round_trip(pipeline, stream, write=True)
            if pipeline is not None
            else _through(schema)
            for stream, schema in spec.outputs.items()
        }
        self._policy = ErrorPolicy(spec.group, spec.on_error)
        self.dead: list[DeadLetter] = []

    def encode(self, stream: str, key: str, value: Any, timestamp: int, record_id: str) -> Record:
        try:
            decoded = self._trips[stream](value)
        except Exception as error:
            raise BadRecord("encode", f"output to {stream!r}: {error}", error) from error
        return Record(key, decoded, timestamp, stream, record_id)

    def produce_all(self, encoded: list[Record]) -> None:
        for record in encoded:
            self.outputs[record.stream].append(record)

    def dead_letter(
        self, record: Record | None, error: BaseException, stage: str, source: Any = None
    ) -> None:
        if self._policy.admit(stage, error):
            self.dead.append(DeadLetter(record, error, stage))


def round_trip(pipeline: Pipeline, stream: str, write: bool = False) -> Callable[[Any], Any]:
    """What a value of `stream` becomes through its codec on Kafka (see the module's
    docstring); `write`: refuse a stream that `run` could not write (`check_wire_schema`)."""
    schema = pipeline.schema_of(stream)
    fmt = pipeline.format_of(stream, pipeline.registry)
    if write:
        check_wire_schema(stream, fmt, schema)
    if fmt == "confluent" and schema is None:  # its writer's schema is not the pipeline's
        return copy.deepcopy
    return _through(schema)


def _through(schema: str | None) -> Callable[[Any], Any]:
    encode, decode = encoder_for(schema), decoder_for(schema)
    return lambda value: decode(encode(value))


class MemoryTable(dict):
    """A declared table in the Harness: `get(key)` and `in`, set with `Harness.set_table`."""


class Harness:
    """Runs computation `computation_name` of `pipeline` in process, one call at a time.

    Every call commits (state and timer changes become the committed baseline), so `state`,
    a restart (`restart()`) and the next call all see what Kafka would have made durable.
    The processing-time clock starts at 0 and moves only through `advance_processing_time`.
    A record of a source stamped beyond its `max_future_ms` is judged against `wall` (the
    wall clock, as on Kafka; a test may replace it) and filed as there
    (core/future_records.py): counted in `future_records`, dead-lettered or processed at wall
    time plus the allowance.
    """

    def __init__(self, pipeline: Pipeline, computation_name: str) -> None:
        self.pipeline = pipeline
        self.spec = pipeline[computation_name]
        self._inputs = {i.stream: i for i in self.spec.inputs}
        self._trips = {s: round_trip(pipeline, s) for s in self._inputs}
        self._state_backend = MemoryStateBackend()
        self._timer_backend = MemoryTimerBackend()
        self._id_backend = MemoryIdBackend()
        self._collector = MemoryOutput(self.spec, pipeline)
        self._now = 0
        self._ids = itertools.count()
        self._tables: dict[str, Any] = {name: MemoryTable() for name in self.spec.tables}
        for name, table in self.spec.global_tables.items():
            self._tables[name] = MemoryGlobalTable(name, table.history_ms)
        self._upstream: dict[tuple[str, int], tuple[int, float]] = {}  # -> (watermark, rate)
        self.wall: Callable[[], int] = now_ms
        self.future_records = 0
        self.executor = self._new_executor()

    def _new_executor(self) -> Executor:
        return Executor(
            self.spec,
            self._state_backend,
            self._timer_backend,
            self._collector,
            clock=lambda: self._now,
            tables=self._tables,
            ids=self._id_backend,
        )

    # -- driving ------------------------------------------------------------------------------

    def send(
        self,
        stream: str,
        key: str,
        value: Any,
        timestamp: int,
        *,
        record_id: str | None = None,
    ) -> None:
        """Deliver one record of input `stream` (its Kafka key, value and timestamp) and fire
        whatever is due after it."""
        inp = self._inputs.get(stream)
        if inp is None:
            raise UsageError(
                f"computation {self.spec.name!r} does not read {stream!r}; "
                f"its inputs are {sorted(self._inputs)}"
            )
        if not isinstance(timestamp, int):
            raise TypeError(f"timestamp must be int milliseconds, got {type(timestamp).__name__}")
        value = self._trips[stream](value)
        if record_id is None:
            record_id = production_id("harness", stream, next(self._ids))
        policy = future_policy(self.pipeline, stream)
        if policy is not None and timestamp > (limit := future_limit(policy, self.wall())):
            self.future_records += 1
            if policy.on_future == "dead_letter":
                record = Record(key, value, timestamp, stream, record_id)
                self._collector.dead_letter(record, future_error(policy, timestamp), "future")
                self._commit()
                return
            timestamp = limit
        record = Record(key, value, timestamp, stream, record_id)
        if inp.key is not None:
            try:
                routed = inp.route(record)
            except Exception as error:
                self._collector.dead_letter(record, error, "key")
                self._commit()
                return
            record = Record(routed, value, timestamp, stream, record_id)
        self.executor.process(record)
        self.executor.fire_due()
        self._commit()

    def set_table(self, name: str, key: str, value: Any, timestamp: int | None = None) -> None:
        """Put `value` (None: delete) under `key` in the declared table `name`, as an update
        of its changelog would; later hook calls see it. A global table with history keeps
        it as the key's value from `timestamp` on (the table record's time, required there),
        under the rules of framework/core/global_tables.py."""
        if name not in self._tables:
            raise UsageError(
                f"computation {self.spec.name!r} declares no table {name!r}; "
                f"its tables are {sorted(self._tables)}"
            )
        table = self._tables[name]
        if isinstance(table, MemoryGlobalTable):
            if timestamp is None and table.history_ms is not None:
                raise UsageError(
                    f"global table {name!r} keeps history: give the record's time, "
                    "set_table(name, key, value, timestamp=ms)"
                )
            value = None if value is None else copy_json(value)
            table.put(key, value, timestamp or 0, self.wall())
        elif value is None:
            self._tables[name].pop(key, None)
        else:
            self._tables[name][key] = copy_json(value)

    def advance_watermark(self, ms: int) -> int:
        """Raise the input low watermark to `ms` (never lowers it) and fire the due timers in
        time order; returns how many fired."""
        fired = self.executor.advance_watermark(ms)
        self._commit()
        return fired

    def set_partition_watermark(
        self, partition: int, ms: int, *, rate: float = 1.0, stream: str | None = None
    ) -> int:
        """Set the watermark of one upstream partition — partition `partition` of input
        `stream` (default: the only input), as its marks would — and its recent rate in
        records a second (its weight under a `Percentile`); never lowers it. The input low
        watermark becomes the computation's over the partitions set so far: the strict
        minimum, or the time its Percentile's fraction of their rate has passed (the strict
        one bounds `output_watermark()`). Fires the due timers; returns how many fired."""
        if stream is None:
            if len(self._inputs) != 1:
                raise UsageError(
                    f"computation {self.spec.name!r} reads {sorted(self._inputs)}: name the "
                    "input, set_partition_watermark(partition, ms, stream=...)"
                )
            (stream,) = self._inputs
        elif stream not in self._inputs:
            raise UsageError(
                f"computation {self.spec.name!r} does not read {stream!r}; "
                f"its inputs are {sorted(self._inputs)}"
            )
        if rate < 0:
            raise UsageError(f"rate must be >= 0 records a second, got {rate}")
        previous, _ = self._upstream.get((stream, partition), (ms, rate))
        self._upstream[(stream, partition)] = (max(ms, previous), rate)
        units = [(w, False, r) for w, r in self._upstream.values()]
        strict = min(w for w, _, _ in units)
        fraction = 1.0 if self.spec.low_watermark is None else self.spec.low_watermark.fraction
        firing, _ = percentile_watermark(units, fraction)
        fired = self.executor.advance_watermark(strict if firing is None else firing, strict)
        self._commit()
        return fired

    def advance_processing_time(self, ms: int) -> int:
        """Set the processing-time clock to `ms` and fire the due timers; returns how many."""
        if ms < self._now:
            raise UsageError(f"processing time cannot go back from {self._now} to {ms}")
        self._now = ms
        fired = self.executor.fire_due()
        self._commit()
        return fired

    def restart(self) -> None:
        """Drop the executor and build a new one from the committed state and timers, as a
        process restart would; the input watermark is carried over (the runtime restores it
        from the watermark channels)."""
        old = self.executor
        self.executor = self._new_executor()
        self.executor.input_watermark = old.input_watermark
        self.executor.strict_watermark = old.strict_watermark
        self.executor.late_records = old.late_records
        self.executor.percentile_late = old.percentile_late
        self.executor.duplicates = old.duplicates
        if self.executor.ids is not None:
            self.executor.ids.collect(old.input_watermark)

    # -- looking ------------------------------------------------------------------------------

    def outputs(self, stream: str) -> list[Record]:
        """The records produced on `stream`, in production order."""
        if stream not in self._collector.outputs:
            raise UsageError(
                f"computation {self.spec.name!r} does not write {stream!r}; "
                f"its outputs are {sorted(self._collector.outputs)}"
            )
        return list(self._collector.outputs[stream])

    def state(self, key: str) -> dict:
        """A copy of `key`'s state ({} if it has none)."""
        doc = self.executor.state.peek(key)
        return copy_json(doc) if doc else {}

    def timers(self, key: str | None = None) -> list[tuple[str, Timer]]:
        """Pending timers (of `key`, or all), sorted by time, key and tag."""
        pending = [(k, t) for k, t in self.executor.timers.pending() if key is None or k == key]
        return sorted(pending, key=lambda kt: (kt[1].time, kt[0], kt[1].tag))

    def dead_letters(self) -> list[tuple[Record, str]]:
        """Failed records with their error, "Type: message"."""
        return [(d.record, d.describe()) for d in self._collector.dead]

    def dead_letter_details(self) -> list[DeadLetter]:
        """Failed records with the exception and the stage it failed in."""
        return list(self._collector.dead)

    @property
    def late_records(self) -> int:
        return self.executor.late_records

    @property
    def percentile_late_records(self) -> int:
        """Late records that only a `Percentile` low watermark made late (also in
        `late_records`)."""
        return self.executor.percentile_late

    @property
    def duplicates(self) -> int:
        """Records dropped as duplicates (dedup=Dedup(...))."""
        return self.executor.duplicates

    @property
    def watermark(self) -> int:
        """The input low watermark: the one timers and lateness follow (ctx.low_watermark)."""
        return self.executor.input_watermark

    @property
    def strict_watermark(self) -> int:
        """The strict input low watermark: the minimum over every upstream partition."""
        return self.executor.strict_watermark

    def output_watermark(self) -> int:
        """The low watermark this computation would publish for its outputs."""
        return self.executor.output_watermark()

    @property
    def processing_time(self) -> int:
        return self._now

    # -- commit -------------------------------------------------------------------------------

    def _commit(self) -> None:
        executor = self.executor
        self._state_backend.apply(executor.state.changes())
        self._timer_backend.apply(executor.timers.changes())
        executor.state.committed()
        executor.timers.committed()
        if executor.ids is not None:
            self._id_backend.apply(executor.ids.changes())
            executor.ids.committed()
        executor.state.evict_clean()
