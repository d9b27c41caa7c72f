"""A deterministic synthetic search-query stream for zeitgeist, with planted anomalies.

A handful of queries follow a daily rhythm (a sinusoid over a compressed "day") with
Poisson-distributed counts per second. Delivery is out of order: every query reaches the
pipeline up to `MAX_DELAY_MS` after it was searched (its timestamp), so a source watermark of
`BoundedOutOfOrderness(ms=MAX_DELAY_MS)` never makes one late — unless `late_fraction` asks
for some stragglers beyond that bound, which the pipeline must drop and count.

Two anomalies are planted at known times, `PLANTED`: one query spikes, one almost vanishes.
`planted(start_ms)` gives their windows for a run, so tests and demos can check that exactly
these are reported. Same `(start_ms, seconds, seed)`, same records in the same order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import NamedTuple

WINDOW_MS = 1000
MAX_DELAY_MS = 1500
"""Bound on how far behind its timestamp a query is delivered (stragglers aside)."""
DAY_MS = 240_000
"""The compressed day of the daily rhythm."""


class Query(NamedTuple):
    text: str  # normalized form; the generator also emits case and spacing variants
    rate: float  # mean searches per second over a day
    amplitude: float  # daily swing, as a fraction of `rate`
    phase: float  # where in the day the peak is, radians


QUERIES = (
    Query("weather", 40.0, 0.3, 0.0),
    Query("news", 25.0, 0.2, 1.0),
    Query("television listings", 15.0, 0.6, math.pi),  # the early-evening peak
    Query("cats", 8.0, 0.1, 2.0),
    Query("solar eclipse", 0.5, 0.0, 0.0),  # rare: must never look anomalous by chance
)


class Planted(NamedTuple):
    """An anomaly planted `start_s`..`start_s + seconds` after the run's first whole second:
    `query`'s rate multiplied by `factor`."""

    query: str
    kind: str
    start_s: int
    seconds: int
    factor: float


PLANTED = (
    Planted("cats", "spike", 60, 5, 8.0),
    Planted("weather", "dip", 85, 6, 0.02),
)


def first_window(start_ms: int) -> int:
    """The first whole second at or after `start_ms`: planted anomalies align to it."""
    return -(-start_ms // WINDOW_MS) * WINDOW_MS


def planted(start_ms: int) -> list[tuple[str, str, int, int]]:
    """The planted anomalies of a run starting at `start_ms`: (query, kind, first window
    start, last window start), in event time."""
    base = first_window(start_ms)
    return [
        (p.query, p.kind, base + p.start_s * 1000, base + (p.start_s + p.seconds - 1) * 1000)
        for p in PLANTED
    ]


def rate(query: Query, t_ms: int, start_ms: int) -> float:
    """Expected searches per second of `query` at time `t_ms` of a run starting at
    `start_ms`, planted anomalies included."""
    base = first_window(start_ms)
    day = 2 * math.pi * ((t_ms - base) % DAY_MS) / DAY_MS
    value = query.rate * (1.0 + query.amplitude * math.sin(day + query.phase))
    for p in PLANTED:
        if p.query == query.text and 0 <= t_ms - base - p.start_s * 1000 < p.seconds * 1000:
            value *= p.factor
    return value


def generate(
    start_ms: int, seconds: int, seed: int, *, late_fraction: float = 0.0
) -> Iterator[tuple[str, dict, int]]:
    """`seconds` of searches from the first whole second at or after `start_ms`, as
    (Kafka key, value, timestamp) in delivery order. The key is the searching user (the
    pipeline re-keys by normalized query); the value fits `zeitgeist.SearchQuery`."""
    rng = random.Random(seed)
    pending: list[tuple[int, int, str, dict, int]] = []  # (arrival, seq, key, value, ts)
    seq = 0
    base = first_window(start_ms)
    for second in range(seconds):
        t0 = base + second * 1000
        for query in QUERIES:
            for _ in range(_poisson(rng, rate(query, t0, start_ms))):
                ts = t0 + rng.randrange(1000)
                delay = rng.randrange(MAX_DELAY_MS)
                if late_fraction and rng.random() < late_fraction:
                    delay = MAX_DELAY_MS + rng.randrange(5 * MAX_DELAY_MS)
                user = rng.randrange(5000)
                value = {
                    "query": _variant(rng, query.text),
                    "user": f"u{user}",
                    "locale": ("en-US", "en-GB", "de-DE", "ar-EG")[user % 4],
                }
                pending.append((ts + delay, seq, f"u{user}", value, ts))
                seq += 1
    pending.sort()
    for _, _, key, value, ts in pending:
        yield key, value, ts


def _variant(rng: random.Random, text: str) -> str:
    """How users type it: mostly as is, sometimes capitalized, shouted or padded."""
    roll = rng.random()
    if roll < 0.8:
        return text
    if roll < 0.9:
        return text.title()
    if roll < 0.95:
        return text.upper()
    return f"  {text.replace(' ', '  ')} "


def _poisson(rng: random.Random, lam: float) -> int:
    """A Poisson variate (Knuth's method; lam stays well below where it underflows)."""
    if lam <= 0:
        return 0
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1
