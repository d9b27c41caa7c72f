"""The interval join: two keyed streams matched within a window of event time, on MillWheel's
own building blocks (per-key state, event-time timers, the input low watermark).

It is an ordinary `Computation`, so `run`, `backfill` and the Harness run it through the same
executor, with its own changelog, timer journal, watermark channel and dead-letter topic:

- a right record at `t_r` matches a left one at `t_l` when
  `t_l - before_ms <= t_r <= t_l + after_ms` (both edges inclusive);
- a record's window is the span of its partners' times; it *closes* once the input low
  watermark passes its far edge plus grace: a left record at `close = t_l + after_ms +
  grace_ms + 1`, a right one at `t_r + before_ms + grace_ms + 1` (the first watermark at which
  no on-time partner can come);
- state: per key, the records whose window is open, each `[t, matched, value]` under "l" or
  "r", sorted by time (arrival order among equal times), so a record meets its partners by
  bisection and the closed ones are a prefix; `matched` is written in the same commit as the
  pair it produced, so a record that matched never yields an unmatched result, across
  restarts and SIGKILL;
- one event-time timer per key, at the earliest close among its records: when it fires the
  records closed by then leave the state, and those of an outer side that never matched are
  produced alone; the timer moves to the next close (which, if the watermark is already past
  it, fires in the same round);
- a record whose own window has closed on arrival is late (`LateRecord`: dropped or
  dead-lettered at stage "late"); a record on time matches only partners still held, so an
  unmatched result, once produced, is never followed by a pair of the same record;
- results carry `max(t_l, t_r)` (a pair) or the record's own time (unmatched): the output
  watermark is held by `hold_ms()` below min(input watermark, earliest close), so none is
  late downstream.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import islice
from operator import itemgetter
from typing import Any

from framework.core.api import Computation, Context, Record, Timer
from framework.errors import BadRecord, LateRecord
from framework.serde.json_codec import encode_json as _encode

HOWS = ("inner", "left", "outer")
LEFT, RIGHT = "l", "r"
EXPIRY = "expire"  # the tag of a key's one timer
_time = itemgetter(0)  # of a held record, [t, matched, value]
ENTRY_BYTES = 16
"""Encoded bytes of a held record beyond its time and value, at most: `[t,0,v]`, the comma
before it, and its side's `"l":[]`."""


def hold_ms(before_ms: int, after_ms: int, grace_ms: int) -> int:
    """How far below min(input watermark, earliest close) the output watermark stays: a pair
    made by a record on time is stamped at least `W - max(before, after) - grace`; an unmatched
    record at least `close - max(before, after) - grace - 1`."""
    return max(before_ms, after_ms, 0) + grace_ms + 1


class Joined(Computation):
    """Joins `left` and `right` records of one key within the window; see the module doc."""

    judges_lateness = True
    """The executor hands it records behind the watermark too: one whose window is still open
    is on time, and the computation raises `LateRecord` for the rest."""

    vouches_state = True
    """Its documents are encoded once per commit, not after every call (core/keyed_state.py):
    it checks each value it keeps (`encode_json`), says how much it adds
    (`ctx.state_grows`), and changes its document only once nothing in the call can fail."""

    def __init__(
        self,
        left: str,
        right: str,
        before_ms: int,
        after_ms: int,
        grace_ms: int,
        how: str,
        output: str,
    ) -> None:
        self.left, self.right = left, right
        self.sides = {left: (LEFT, RIGHT), right: (RIGHT, LEFT)}
        self.before, self.after, self.grace = before_ms, after_ms, grace_ms
        self.output = output
        # how far past its own time each side's window closes (the +1: "passes", not "reaches")
        self.reach = {LEFT: after_ms + grace_ms + 1, RIGHT: before_ms + grace_ms + 1}
        self.alone = {LEFT: how in ("left", "outer"), RIGHT: how == "outer"}

    def process_record(self, ctx: Context, record: Record) -> None:
        sides = self.sides.get(record.stream)
        if sides is None:  # the declaration reads only the two sides: a driver's mistake
            raise BadRecord(
                "process_record",
                f"record of {record.stream!r} in a join of {self.left!r} and {self.right!r}",
            )
        side, other = sides
        ts, value = record.timestamp, record.value
        close = ts + self.reach[side]
        watermark = ctx.low_watermark
        if close <= watermark:
            raise self._late(record, side, close, watermark)
        # Everything that may fail comes before the state changes (vouches_state): the
        # value's check, the estimate of the document's size, the pairs' productions.
        try:
            encoded = _encode(value)
        except Exception as error:
            raise BadRecord(
                "state",
                f"state of key {ctx.key!r} cannot be stored ({error}): a join keeps its open "
                "records' values as JSON",
                error,
            ) from error
        ctx.state_grows(len(encoded) + len(str(ts)) + ENTRY_BYTES)
        state = ctx.state
        # left at t_l meets right at t_r when t_r - after <= t_l <= t_r + before; a partner
        # is still held (open) while t + its reach > W
        if side == LEFT:
            low, high = ts - self.before, ts + self.after
        else:
            low, high = ts - self.after, ts + self.before
        low = max(low, watermark - self.reach[other] + 1)
        met = []
        partners = state.get(other)
        if partners:  # the live document, sorted by time
            at = bisect_left(partners, low, key=_time)
            for entry in islice(partners, at, None):
                t = entry[0]
                if t > high:
                    break
                if side == LEFT:
                    self._pair(ctx, value, entry[2], ts, t)
                else:
                    self._pair(ctx, entry[2], value, t, ts)
                met.append(entry)
        for entry in met:  # flags written with the pairs, in the same commit
            entry[1] = 1
        mine = state.get(side)
        if mine is None:
            mine = state[side] = []
        mine.insert(bisect_right(mine, ts, key=_time), [ts, 1 if met else 0, value])
        self._arm(ctx, state)

    def process_timer(self, ctx: Context, timer: Timer) -> None:
        state, now = ctx.state, timer.time
        closing = {}  # side -> how many of its records (a prefix) closed by `now`
        for side in (LEFT, RIGHT):
            entries = state.get(side)
            if not entries:
                continue
            closed = bisect_right(entries, now - self.reach[side], key=_time)  # t + reach <= now
            closing[side] = closed
            if self.alone[side]:
                for t, matched, value in entries[:closed]:
                    if not matched:
                        pair = (value, None) if side == LEFT else (None, value)
                        ctx.produce(
                            self.output,
                            {"key": ctx.key, "left": pair[0], "right": pair[1]},
                            timestamp=t,
                        )
        for side, closed in closing.items():  # after every production (vouches_state)
            if closed == len(state[side]):
                del state[side]
            elif closed:
                del state[side][:closed]
        self._arm(ctx, state)

    def queried_state(self, state: Any) -> Any:
        """A key's open records per side, oldest first (`logwheel run --serve`):
        `{"left": [{"timestamp", "matched", "value"}, ...], "right": [...]}`."""
        return {
            name: [
                {"timestamp": t, "matched": bool(matched), "value": value}
                for t, matched, value in state.get(side, ())
            ]
            for name, side in (("left", LEFT), ("right", RIGHT))
        }

    def _arm(self, ctx: Context, state: dict) -> None:
        """Set the key's timer at the earliest close among its records (none: none); each
        side's records are sorted by time, so its earliest close is its first record's."""
        lefts, rights, reach = state.get(LEFT), state.get(RIGHT), self.reach
        if lefts:
            close = lefts[0][0] + reach[LEFT]
            if rights:
                close = min(close, rights[0][0] + reach[RIGHT])
        elif rights:
            close = rights[0][0] + reach[RIGHT]
        else:
            ctx.cancel_timer(EXPIRY)
            return
        ctx.set_timer(EXPIRY, close)

    def _pair(self, ctx: Context, lv: Any, rv: Any, t_l: int, t_r: int) -> None:
        value = {"key": ctx.key, "left": lv, "right": rv}
        ctx.produce(self.output, value, timestamp=max(t_l, t_r))

    def _late(self, record: Record, side: str, close: int, watermark: int) -> LateRecord:
        edge = "after_ms" if side == LEFT else "before_ms"
        return LateRecord(
            f"{'left' if side == LEFT else 'right'} record at {record.timestamp} came after its "
            f"join window closed (the input low watermark is {watermark}; it closed past "
            f"{close - 1} = its time + {edge} + grace_ms {self.grace}): raise grace_ms to take "
            "records this late",
            closes=close,
        )
