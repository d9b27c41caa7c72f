"""Zeitgeist, MillWheel's motivating pipeline (VLDB 2013, §2 and Figure 1): find search
queries that spike or dip, against a model of each query's usual traffic.

    queries ─▶ window-counter ─▶ window-counts ─▶ ModelCalculator ─▶ models ─┬▶ SpikeDetector
                                                                            └▶ DipDetector
    (both detectors write `anomalies`)

- `window-counter` is no class of its own: `pipeline.windowed` with `windows.Tumbling` and
  `windows.Count()` (jobs/zeitgeist/__init__.py) counts searches per normalized query in
  1-second event-time windows, each produced once the low watermark has passed its end, when
  its count is known to be complete (§2, "Low Watermarks"). Only windows with searches exist.
- `ModelCalculator` keeps per query an exponentially weighted moving average of its count per
  window — the expected count — and emits, for every window, empty ones included, what the
  model had predicted for it next to what was observed.
- `SpikeDetector` / `DipDetector` compare the two and report anomalies.
"""

from __future__ import annotations

from framework import Computation, Context, Record, Timer

WINDOW_MS = 1000
EMPTY = "empty"
"""The model's timer at the end of the window after the last one it folded in."""


def normalize(text: str) -> str:
    """The form queries are counted under: lower case, single spaces, no padding."""
    return " ".join(text.lower().split())


def query_key(record: Record) -> str:
    """Key extractor for `queries`: the normalized query text."""
    return normalize(record.value["query"])


class ModelCalculator(Computation):
    """Per query, an exponentially weighted moving average (EWMA) of its count per window:
    the count the next window is expected to have. For each window it emits `models`
    {query, window_start, expected, count}, where `expected` is what the model predicted for
    that window BEFORE seeing it — the figure a detector compares the count with.

    - Empty windows: `window-counts` holds only windows that had searches, but a dip is the
      ABSENCE of searches, which no record shows. So while a query is followed, an event-time
      timer, `EMPTY`, waits at the end of the window after the last one folded in. It fires
      once this computation's input low watermark — the window counter's output watermark —
      passes that end, hence after that window's result would have arrived (a watermark never
      overtakes the records before it): the window was empty and counts 0. A result that comes
      after a gap (upstream closed several windows before the watermark moved here) first folds
      in the empty windows before it, so the models are the same whichever comes first.
    - Forgetting: after `idle_windows` empty windows in a row a query is no longer followed
      (no timer, no zeros) until it is searched again, so a long tail of one-off queries does
      not fold in zeros forever; a total outage of a popular query is reported as a dip for
      that long (5 minutes by default). The windows it then misses still count as empty,
      without a model each: the average decays over the gap.
    - Warm-up: the first `warmup` windows of a query only build the model (as a running mean,
      which is an EWMA without start-up bias) and emit nothing: every emitted model is one a
      detector may judge by.
    - Robustness: after warm-up, a count folds in clamped to [expected / clamp,
      expected * clamp + 1], so a spike or an outage moves the model only slowly and does not
      cause a false anomaly of the opposite kind once it is over; a lasting change of level is
      still followed, within a few dozen windows.
    - A window at or before the last one folded in is ignored (a replay), so the model does not
      count a window twice.

    A model's timestamp is its window's end - 1, as the window's result's, and never late
    downstream: a window that came was on time here, so its model is too; while `EMPTY` is
    pending at the end E of the next window, the output watermark stays below E, and the empty
    windows still to come are that one or later (timestamp >= E - 1). The model `EMPTY`
    produces when it fires precedes the raised watermark, which the runtime publishes only
    after the firing's productions.

    State of a query — the model other teams read from this computation's changelog — uses
    the field names of `zeitgeist.Model`: `query`, `window_start` (the last window folded in),
    `expected` (the prediction for the next window), `count` (the last window's count), plus
    `windows` (how many were folded in, for the warm-up) and `idle` (empty windows in a row,
    present while the query is followed). The state stays JSON until `zeitgeist.Model` gains
    these fields; then `state_schema = "zeitgeist.Model"` makes the changelog speak that type.
    """

    alpha = 0.1
    warmup = 10
    clamp = 2.0
    idle_windows = 300
    window_ms = WINDOW_MS

    def process_record(self, ctx: Context, record: Record) -> None:
        start, count = record.value["start"], record.value["value"]
        state = ctx.state
        last = state.get("window_start")
        if last is not None and start <= last:
            return
        self._fold_empty(ctx, before=start)
        self._fold(ctx, start, count)
        state["idle"] = 0
        ctx.set_timer(EMPTY, start + 2 * self.window_ms)

    def process_timer(self, ctx: Context, timer: Timer) -> None:
        self._fold_empty(ctx, before=timer.time)
        if "idle" in ctx.state:
            ctx.set_timer(EMPTY, timer.time + self.window_ms)

    def _fold_empty(self, ctx: Context, before: int) -> None:
        """Fold a count of 0 in for each window after the last one folded in that starts before
        `before`, while the query is followed; stop following it after `idle_windows`."""
        state = ctx.state
        if "idle" not in state:
            return
        start = state["window_start"] + self.window_ms
        while start < before and "idle" in state:
            self._fold(ctx, start, 0)
            state["idle"] += 1
            if state["idle"] >= self.idle_windows:
                del state["idle"]  # silent long enough: forgotten
            start += self.window_ms

    def _fold(self, ctx: Context, start: int, count: int) -> None:
        """Emit the model's prediction for window `start` next to its `count` (after warm-up),
        then fold the count into the model."""
        state = ctx.state
        last = state.get("window_start")
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
                timestamp=start + self.window_ms - 1,
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
    counter produces a window once the low watermark has passed its end, and the model counts
    one it did not get as empty once its own watermark has."""

    factor = 5.0
    min_expected = 20.0

    def process_record(self, ctx: Context, record: Record) -> None:
        model = record.value
        expected = model["expected"]
        if expected >= self.min_expected and model["count"] < expected / self.factor:
            _anomaly(ctx, model, "dip")
