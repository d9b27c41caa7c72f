"""Bloom filters on mmh3, and generations of them that forget by event time (MillWheel §5.3).

A deduplicating task asks "seen this id before?" for every record, and almost every answer is
no: a Bloom filter answers most of those in memory, so a first-seen record costs no store
read; a "maybe" is confirmed in the store. A Bloom filter cannot forget, so ids are kept in
one generation per slice of event time: when the watermark passes a slice plus the horizon,
its generation is dropped whole, as the store drops its ids.
"""

from __future__ import annotations

import math

import mmh3

SLICES = 4
"""Generations per horizon: ids outlive the horizon by at most a quarter of it."""


def item_hash(key: str, rid: str) -> tuple[int, int]:
    """The two 64-bit hashes of (key, id) every filter probes with (double hashing)."""
    return mmh3.hash64(f"{key}\x00{rid}", signed=False)


class BloomFilter:
    """A Bloom filter of `capacity` items at false-positive rate at most `fpr`: m bits (a power
    of two, so a probe is a mask), k probes at (h1 + i*h2) mod m with h2 odd, so the k probes
    are distinct (Kirsch and Mitzenmacher's double hashing)."""

    __slots__ = ("bits", "mask", "k", "count", "capacity")

    def __init__(self, capacity: int, fpr: float) -> None:
        capacity = max(1, capacity)
        need = max(64, math.ceil(-capacity * math.log(fpr) / math.log(2) ** 2))
        m = 1 << (need - 1).bit_length()
        self.mask = m - 1
        # the optimal k for the bits asked for; the extra bits of rounding m up only help
        self.k = max(1, min(round(m / capacity * math.log(2)), math.ceil(-math.log2(fpr))))
        self.bits = bytearray(m // 8)
        self.count = 0
        self.capacity = capacity

    def add(self, h: tuple[int, int]) -> None:
        h1, h2 = h
        h2 |= 1
        mask, bits = self.mask, self.bits
        for i in range(self.k):
            bit = (h1 + i * h2) & mask
            bits[bit >> 3] |= 1 << (bit & 7)
        self.count += 1

    def __contains__(self, h: tuple[int, int]) -> bool:
        h1, h2 = h
        h2 |= 1
        mask, bits = self.mask, self.bits
        for i in range(self.k):
            bit = (h1 + i * h2) & mask
            if not bits[bit >> 3] & (1 << (bit & 7)):
                return False
        return True

    @property
    def full(self) -> bool:
        return self.count >= self.capacity


class Generations:
    """Bloom filters of one task's ids, one generation per `slice_ms` of event time.

    Sized from the ids expected within one horizon (`expected` over `SLICES` slices), each
    generation within `fpr / (SLICES + 1)`, so that probing every live generation (at most
    SLICES + 1 while the watermark moves) stays within `fpr`. A generation that outgrows its
    share gets another filter, twice as large at half the rate (scalable Bloom filters,
    Almeida et al.), so its rate stays bounded instead of rising as it fills.
    """

    def __init__(self, slice_ms: int, expected: int, fpr: float) -> None:
        self.slice_ms = slice_ms
        self._capacity = max(1, expected // SLICES)
        self._fpr = fpr / (SLICES + 1)
        self._filters: dict[int, list[BloomFilter]] = {}
        self._all: list[BloomFilter] = []  # every live filter, probed in this order

    def add(self, h: tuple[int, int], time: int) -> None:
        generation = time // self.slice_ms
        filters = self._filters.get(generation)
        if filters is None or filters[-1].full:
            if filters is None:
                filters = self._filters[generation] = []
            n = len(filters)
            bloom = BloomFilter(self._capacity << n, self._fpr / 2 ** (n + 1))
            filters.append(bloom)
            self._all.append(bloom)
        filters[-1].add(h)

    def __contains__(self, h: tuple[int, int]) -> bool:
        return any(h in bloom for bloom in self._all)

    def drop_before(self, time: int) -> None:
        """Forget the generations whose slices end at or before `time` (a slice boundary)."""
        first = time // self.slice_ms
        doomed = [g for g in self._filters if g < first]
        for g in doomed:
            del self._filters[g]
        if doomed:
            self._all = [b for filters in self._filters.values() for b in filters]

    @property
    def bytes(self) -> int:
        return sum(len(b.bits) for b in self._all)
