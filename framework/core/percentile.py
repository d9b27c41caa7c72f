"""Percentile low watermarks (MillWheel §7.2): trading a little completeness for latency.

The strict low watermark of a task is the minimum over every upstream partition, so one
straggler holds every timer and window. A computation declared with `Percentile(f)` fires on
the largest time `t` such that the upstream partitions whose watermark is >= `t` carry at least
a fraction `f` of the recent input, each weighted by its record rate over the last minute.

Upstream means where a task's data comes from: for an input kept by its Kafka key, the
partition itself (weighed by what this task read of it); for a re-keyed input, every partition
of the stream before the re-key, through the marks its re-keying tasks publish (weighed by how
far each has read, `Mark.read`). As for the strict watermark, an upstream partition that has not
reported makes it unknown, and idle ones are left out. A partition with no recent input weighs
nothing; while no partition has a known rate yet (the first seconds), it is the strict minimum.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from framework.core.watermarks import Mark, Published, combine

WINDOW_S = 60.0
"""The rates weigh what each upstream partition carried over this last span of wall time."""
STEP_S = 1.0
"""Samples of a count closer together than this replace each other (bounded memory)."""

Unit = tuple[int | None, bool, float]
"""One upstream partition: (watermark or None when unknown, idle, recent records per second)."""


class RecentRate:
    """How fast a growing count (records read, an offset) grew over the last minute."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, count: int) -> None:
        """The count is now `count`; a lower one (a producer that started over) starts again."""
        now, samples = self._clock(), self._samples
        if samples and count < samples[-1][1]:
            samples.clear()
        if len(samples) >= 2 and now - samples[-2][0] < STEP_S:
            samples[-1] = (now, count)  # keep one sample a step, the newest
        else:
            samples.append((now, count))

    def rate(self) -> float:
        """Records a second over the last minute: growth since the newest sample at least a
        minute old (else the oldest), over the minute; 0.0 when nothing is known."""
        samples, since = self._samples, self._clock() - WINDOW_S
        while len(samples) >= 2 and samples[1][0] <= since:
            samples.popleft()
        if len(samples) < 2:
            return 0.0
        return (samples[-1][1] - samples[0][1]) / WINDOW_S


def percentile_watermark(units: Iterable[Unit], fraction: float) -> tuple[int | None, bool]:
    """The percentile low watermark over upstream partitions, as `combine` gives the strict
    one: unknown if a busy one is unknown, idle if all are idle. Otherwise the largest `t`
    such that the busy partitions with watermark >= `t` hold at least `fraction` of their total
    rate; the strict minimum when `fraction` is 1 or no rate is known yet."""
    units = list(units)
    strict = combine((w, idle) for w, idle, _ in units)
    if strict[0] is None or fraction >= 1:
        return strict
    busy = sorted(((w, rate) for w, idle, rate in units if not idle), reverse=True)
    total = sum(rate for _, rate in busy)
    if total <= 0:
        return strict
    held = 0.0
    for watermark, rate in busy:
        held += rate
        if held >= fraction * total * (1 - 1e-9):  # the float sum of the rates may fall short
            return watermark, False
    return strict  # not reached: the last one holds the whole total


class Weighted(Published):
    """The marks of a re-keyed input's upstream producers (its re-keying tasks), each also
    weighed by how fast it reads its partition, for a percentile low watermark."""

    def __init__(
        self, topic: str, partition: int, producers: Iterable[str], clock: Callable[[], float]
    ) -> None:
        super().__init__(topic, partition, producers)
        self._rates = {p: RecentRate(clock) for p in self.producers}

    def offer(self, mark: Mark) -> None:
        rate = self._rates.get(mark.producer)
        if rate is not None:
            rate.add(mark.read)
        super().offer(mark)

    def units(self) -> list[Unit]:
        """Each upstream producer's applied watermark, idleness and recent rate."""
        return [
            (*(state.applied or (None, False)), self._rates[name].rate())
            for name, state in self._producers.items()
        ]
