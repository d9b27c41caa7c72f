"""Window shapes: which event-time windows a record belongs to, and when each one closes.

Windows are half-open, `[start, end)`, in event-time milliseconds. Tumbling and hopping windows
are fixed and aligned to the epoch (a hopping window starts at a multiple of `every_ms`), so any
process computes the same windows for a timestamp; sessions depend on the key's other records
and are merged by the windowed computation. A window closes once the input low watermark
reaches `end + grace_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.errors import ConfigurationError


@dataclass(frozen=True)
class Hopping:
    """Windows of `size_ms` starting every `every_ms` (0 < every_ms <= size_ms): a record
    belongs to `size_ms / every_ms` of them (rounded)."""

    size_ms: int
    every_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        _ms(self.size_ms, self.every_ms, self.grace_ms)
        if not (0 < self.every_ms <= self.size_ms and self.grace_ms >= 0):
            raise ConfigurationError(
                f"{self!r}: windows need 0 < every_ms <= size_ms and grace_ms >= 0, "
                "e.g. Hopping(size_ms=60_000, every_ms=10_000)"
            )

    def starts(self, timestamp: int) -> range:
        """Starts of the windows holding `timestamp`, latest first."""
        last = timestamp - timestamp % self.every_ms
        return range(last, timestamp - self.size_ms, -self.every_ms)


class Tumbling(Hopping):
    """Back-to-back windows of `size_ms`: a hopping window with `every_ms == size_ms`, so each
    record belongs to exactly one."""

    def __init__(self, size_ms: int, grace_ms: int = 0) -> None:
        super().__init__(size_ms, size_ms, grace_ms)

    def __repr__(self) -> str:
        return f"Tumbling(size_ms={self.size_ms}, grace_ms={self.grace_ms})"


@dataclass(frozen=True)
class Session:
    """Per key, `[first record's time, last record's time + gap_ms)`: a record opens its own
    session, and sessions that overlap merge."""

    gap_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        _ms(self.gap_ms, self.grace_ms)
        if not (self.gap_ms > 0 and self.grace_ms >= 0):
            raise ConfigurationError(
                f"{self!r}: sessions need gap_ms > 0 and grace_ms >= 0, e.g. Session(gap_ms=30_000)"
            )


Window = Hopping | Session


def _ms(*values: object) -> None:
    for value in values:
        if type(value) is not int:
            raise ConfigurationError(
                f"window durations are int milliseconds, got {value!r}: e.g. size_ms=60_000"
            )
