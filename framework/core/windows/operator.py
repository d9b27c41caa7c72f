"""The windowed computation: windows and an aggregator over MillWheel's own building blocks.

It is an ordinary `Computation` (so `run`, `backfill` and the Harness run it through the same
executor, with its own changelog, timer journal, watermark channel and dead-letter topic):

- state: one entry per open window of the key, under the window's start — the accumulator for
  fixed windows, `[end, accumulator]` for sessions;
- timers: one event-time timer per open window, tagged by its start, at `end + grace_ms`; when
  it fires the window's result is produced (`emit="final"`) and its entry deleted in the same
  commit, so a key whose windows all closed leaves a tombstone and nothing else;
- lateness is the window's, not the record's: a record behind the low watermark still counts
  in each of its windows that is open (within grace); only a record with no open window left
  is late (`LateRecord`, which the executor drops or dead-letters by `on_late`).
"""

from __future__ import annotations

from typing import Any

from framework.core.api import Computation, Context, Record, Timer
from framework.core.windows.aggregates import Aggregate
from framework.core.windows.shapes import Session, Window
from framework.errors import LateRecord

_MISSING = object()


class Windowed(Computation):
    """Aggregates each key's records per window into `output`; see the module docstring."""

    judges_lateness = True
    """The executor hands it records behind the watermark too: a window within grace takes
    them, and the computation raises `LateRecord` for the rest."""

    def __init__(self, window: Window, aggregate: Aggregate, output: str, emit: str) -> None:
        self.window = window
        self.aggregate = aggregate
        self.output = output
        self.final = emit == "final"
        self.grace = window.grace_ms
        self.session = isinstance(window, Session)
        if isinstance(window, Session):
            self.gap = window.gap_ms
            self.process_record = self._session_record  # type: ignore[method-assign]
        else:
            self.size = window.size_ms
            self.starts = None if window.every_ms == window.size_ms else window.starts

    # -- fixed windows --------------------------------------------------------------------------

    def process_record(self, ctx: Context, record: Record) -> None:
        ts, size, grace, aggregate = record.timestamp, self.size, self.grace, self.aggregate
        starts = (ts - ts % size,) if self.starts is None else self.starts(ts)
        state = ctx.state
        took = False
        for start in starts:
            slot = str(start)
            acc = state.get(slot, _MISSING)
            if acc is _MISSING:
                if start + size + grace <= ctx.low_watermark:
                    continue  # closed (and already emitted)
                acc = aggregate.initial()
                ctx.set_timer(slot, start + size + grace)
            state[slot] = acc = aggregate.add(acc, record)
            took = True
            if not self.final:
                self._emit(ctx, start, start + size, acc)
        if not took:
            raise self._late(record, ctx, [start + size for start in starts])

    # -- sessions ------------------------------------------------------------------------------

    def _session_record(self, ctx: Context, record: Record) -> None:
        ts, aggregate, state = record.timestamp, self.aggregate, ctx.state
        start, end = ts, ts + self.gap
        bridged = sorted(
            (int(slot), slot, entry[0], entry[1])
            for slot, entry in state.items()
            if int(slot) < end and ts < entry[0]
        )
        if bridged:
            start = min(start, bridged[0][0])
            end = max(end, max(b[2] for b in bridged))
        if end + self.grace <= ctx.low_watermark:
            raise self._late(record, ctx, [end])
        slot = str(start)
        acc = _MISSING
        for _, old, _, other in bridged:
            acc = other if acc is _MISSING else aggregate.merge(acc, other)
            del state[old]
            if old != slot:
                ctx.cancel_timer(old)
        if acc is _MISSING:
            acc = aggregate.initial()
        acc = aggregate.add(acc, record)
        state[slot] = [end, acc]
        ctx.set_timer(slot, end + self.grace)
        if not self.final:
            self._emit(ctx, start, end, acc)

    # -- closing -------------------------------------------------------------------------------

    def process_timer(self, ctx: Context, timer: Timer) -> None:
        entry = ctx.state.pop(timer.tag, _MISSING)
        if entry is _MISSING or not self.final:
            return
        start = int(timer.tag)
        if self.session:
            end, acc = entry
        else:
            end, acc = start + self.size, entry
        self._emit(ctx, start, end, acc)

    # -- queries -------------------------------------------------------------------------------

    def queried_state(self, state: Any) -> Any:
        """A key's open windows, oldest first: `[{"start", "end", "value"}, ...]`, each
        value the aggregate's result so far (what `emit="update"` would produce)."""
        windows = []
        for slot, entry in state.items():
            start = int(slot)
            end, acc = entry if self.session else (start + self.size, entry)
            windows.append({"start": start, "end": end, "value": self.aggregate.result(acc)})
        return sorted(windows, key=lambda w: w["start"])

    def _emit(self, ctx: Context, start: int, end: int, acc: Any) -> None:
        value = {"key": ctx.key, "start": start, "end": end, "value": self.aggregate.result(acc)}
        ctx.produce(self.output, value, timestamp=end - 1)

    def _late(self, record: Record, ctx: Context, ends: list[int]) -> LateRecord:
        closes = ", ".join(str(end + self.grace) for end in ends)
        return LateRecord(
            f"record at {record.timestamp} came after its window closed (the input low "
            f"watermark is {ctx.low_watermark}; it closed at {closes} = end + grace_ms "
            f"{self.grace}): raise grace_ms to take records this late",
            closes=max(ends) + self.grace,
        )
