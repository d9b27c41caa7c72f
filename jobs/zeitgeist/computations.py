"""Zeitgeist, MillWheel's motivating pipeline (VLDB 2013, §2 and Figure 1): find search
queries that spike or dip, against a model of each query's usual traffic.

    queries ─▶ WindowCounter ─▶ window-counts ─▶ ModelCalculator ─▶ models ─┬▶ SpikeDetector
                                                                           └▶ DipDetector
    (both detectors write `anomalies`)

- `WindowCounter` buckets searches into 1-second event-time windows per normalized query and
  closes each window with an event-time timer at its end: only once the low watermark has
  passed the window is its count known to be complete (§2, "Low Watermarks"). It reports
  EMPTY windows too (count 0) for every query it has seen recently, so that a query which
  stops entirely shows up as a dip rather than as silence.
- `ModelCalculator` keeps per query an exponentially weighted moving average of its count per
  window — the expected count — and emits, for every window, what the model had predicted for
  it next to what was observed.
- `SpikeDetector` / `DipDetector` compare the two and report anomalies.
"""

from __future__ import annotations

from framework.core.api import Computation, Context, Record, Timer

WINDOW_MS = 1000


def normalize(text: str) -> str:
    """The form queries are counted under: lower case, single spaces, no padding."""
    return " ".join(text.lower().split())


def query_key(record: Record) -> str:
    """Key extractor for `queries`: the normalized query text."""
    return normalize(record.value["query"])


class WindowCounter(Computation):
    """Counts searches per query per 1-second event-time window; emits `window-counts`
    {query, window_start, window_end, count} once the low watermark passes each window's end,
    for every window from the first one the query was seen in, empty ones included, until it
    has been silent for `idle_windows` windows (then its state is dropped).

    State of a query: `counts` (window start as str -> count, for windows not yet emitted),
    `next` (start of the earliest window not yet emitted) and `idle` (consecutive empty windows
    emitted). One event-time timer, "close", at the end of window `next`.

    Why zeros are emitted here: a dip is the ABSENCE of records, which no record-driven
    computation downstream can see. The low-watermark timer is what knows that a window is
    complete — also when it is empty — so the window counter is the place that can say "0".
    The series is dense per query (one record per window, in window order), which also lets the
    model treat its input as a regular time series. Queries silent for `idle_windows` are
    forgotten, so a long tail of one-off queries does not emit zeros forever; a total outage of
    a popular query is reported as a dip for that long (5 minutes by default).

    Timestamp of a window's record: window_end - 1, the largest timestamp inside the window.
    It is no smaller than any record counted in it (MillWheel §4.5: an aggregate's timestamp
    must not be smaller than its sources'), keeps the record inside its own window for anyone
    bucketing downstream by timestamp, and is never late downstream: this computation's output
    watermark is min(input watermark, earliest pending event timer). While the "close" timer at
    window_end is pending and not due, the input watermark W is < window_end, i.e.
    <= window_end - 1, so every output watermark published before the window is emitted is
    <= window_end - 1 <= its timestamp. The timer fires in the very call that raises W to
    window_end or more (`Executor.advance_watermark` fires what is due before returning), and
    the runtime publishes the raised watermark only with, and after, the firing's productions;
    consumers apply it only once they have read past them. (The timer alone would only hold
    the output watermark at window_end; the record stays on time because no watermark is
    published between W reaching window_end and the timer firing.) tests/unit/jobs checks it:
    downstream sees no late records with watermarks taken from `output_watermark()`.
    """

    window_ms = WINDOW_MS
    idle_windows = 300

    def process_record(self, ctx: Context, record: Record) -> None:
        start = record.timestamp - record.timestamp % self.window_ms
        state = ctx.state
        counts = state.get("counts")
        if counts is None:
            counts = state["counts"] = {}
        slot = str(start)
        counts[slot] = counts.get(slot, 0) + 1
        # A record that is not late lies at or after the watermark, hence after every window
        # already emitted (each was emitted once the watermark passed its end): `start` is
        # before `next` only while nothing has been emitted, e.g. when a query's first
        # records arrive out of order.
        following = state.get("next")
        if following is None or start < following:
            state["next"] = start
            ctx.set_timer("close", start + self.window_ms)

    def process_timer(self, ctx: Context, timer: Timer) -> None:
        start = timer.time - self.window_ms
        state = ctx.state
        counts = state.get("counts", {})
        count = counts.pop(str(start), 0)
        ctx.produce(
            "window-counts",
            {"query": ctx.key, "window_start": start, "window_end": timer.time, "count": count},
            timestamp=timer.time - 1,  # see the class docstring: never late downstream
        )
        idle = 0 if count else state.get("idle", 0) + 1
        if idle >= self.idle_windows and not counts:
            state.clear()  # silent long enough: forget the query (a tombstone)
            return
        state["idle"] = idle
        state["next"] = timer.time
        ctx.set_timer("close", timer.time + self.window_ms)


class ModelCalculator(Computation):
    """Per query, an exponentially weighted moving average (EWMA) of its count per window:
    the count the next window is expected to have. For each window count it emits `models`
    {query, window_start, expected, count}, where `expected` is what the model predicted for
    that window BEFORE seeing it — the figure a detector compares the count with.

    - Warm-up: the first `warmup` windows of a query only build the model (as a running mean,
      which is an EWMA without start-up bias) and emit nothing: every emitted model is one a
      detector may judge by.
    - Robustness: after warm-up, a count folds in clamped to [expected / clamp,
      expected * clamp + 1], so a spike or an outage moves the model only slowly and does not
      cause a false anomaly of the opposite kind once it is over; a lasting change of level is
      still followed, within a few dozen windows.
    - Windows it never got (the query was forgotten by the window counter after a silence)
      count as empty windows: the average decays over the gap.
    - A window at or before the last one folded in is ignored (a replay), so the model does not
      count a window twice.

    State of a query — the model other teams read from this computation's changelog — uses
    the field names of `zeitgeist.Model`: `query`, `window_start` (the last window folded in),
    `expected` (the prediction for the next window), `count` (the last window's count), plus
    `windows` (how many were folded in, for the warm-up). The state stays JSON until
    `zeitgeist.Model` gains a `windows` field; then `state_schema = "zeitgeist.Model"` makes
    the changelog speak that type.
    """

    alpha = 0.1
    warmup = 10
    clamp = 2.0
    window_ms = WINDOW_MS

    def process_record(self, ctx: Context, record: Record) -> None:
        value = record.value
        start, count = value["window_start"], value["count"]
        state = ctx.state
        last = state.get("window_start")
        if last is not None and start <= last:
            return
        windows = state.get("windows", 0)
        expected = state.get("expected")
        if expected is not None and last is not None:
            missed = (start - last) // self.window_ms - 1
            if missed > 0:
                expected *= (1 - self.alpha) ** missed
        if windows >= self.warmup:
            ctx.produce(
                "models",
                {"query": ctx.key, "window_start": start, "expected": expected, "count": count},
            )
        if expected is None:
            expected = float(count)
        elif windows < self.warmup:
            expected += (count - expected) / (windows + 1)
        else:
            observed = min(max(count, expected / self.clamp), expected * self.clamp + 1.0)
            expected += self.alpha * (observed - expected)
        state["query"] = ctx.key
        state["window_start"] = start
        state["expected"] = expected
        state["count"] = count
        state["windows"] = windows + 1


def _anomaly(ctx: Context, model: dict, kind: str) -> None:
    ctx.produce(
        "anomalies",
        {
            "query": ctx.key,
            "window_start": model["window_start"],
            "kind": kind,
            "observed": model["count"],
            "expected": model["expected"],
        },
    )


class SpikeDetector(Computation):
    """Reports a `spike` when a window's count exceeds both `factor` times the expected count
    and `min_count` (so rare queries do not spike on a handful of searches). Stateless: the
    model carries the history, and models come only after warm-up."""

    factor = 3.0
    min_count = 20

    def process_record(self, ctx: Context, record: Record) -> None:
        model = record.value
        if model["count"] > max(self.min_count, self.factor * model["expected"]):
            _anomaly(ctx, model, "spike")


class DipDetector(Computation):
    """Reports a `dip` when a window's count falls below the expected count divided by
    `factor`, for queries expected at least `min_expected` times per window (below that, an
    empty window is ordinary chance). Sound only because window counts are complete: the window
    counter emits a window, zeros included, once the low watermark has passed its end."""

    factor = 5.0
    min_expected = 20.0

    def process_record(self, ctx: Context, record: Record) -> None:
        model = record.value
        expected = model["expected"]
        if expected >= self.min_expected and model["count"] < expected / self.factor:
            _anomaly(ctx, model, "dip")
