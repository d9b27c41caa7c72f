"""Bloom filters on mmh3, and generations of them that forget by event time (MillWheel §5.3).

A deduplicating task asks "seen this id before?" for every record, and almost every answer is
no: a Bloom filter answers most of those in memory, so a first-seen record costs no store
read; a "maybe" is confirmed in the store. A Bloom filter cannot forget, so ids are kept in
one generation per slice of event time: when the watermark passes a slice plus the horizon,
its generation is dropped whole, as the store drops its ids.

The filter runs on the per-record path in Python, so it is shaped for few bytecodes: one
128-bit mmh3 hash per item, read as four 32-bit probes (K = 4, unrolled; small ints, no
big-int shifts), m a power of two (a probe is a mask). Four probes need about a third more
bits than the optimal k for the same rate, and cost less than half the time.
"""

from __future__ import annotations

import math
import struct

import mmh3

SLICES = 4
"""Generations per horizon: ids outlive the horizon by at most a quarter of it."""
K = 4
_MAX_BITS = 1 << 32  # a probe is 32 bits of the hash


Probes = tuple[int, int, int, int]
probes_of = struct.Struct("<4I").unpack
"""The four 32-bit probes of a 16-byte hash."""


def item_hash(key: str, rid: str) -> Probes:
    """The probes of (key, id): its 128-bit mmh3 hash, as four 32-bit parts."""
    return probes_of(mmh3.hash_bytes(f"{key}\x00{rid}"))


class BloomFilter:
    """The bits of a Bloom filter of `capacity` items at a false-positive rate of at most
    `fpr`; `Generations` sets and probes them (inlined there: the per-record path)."""

    __slots__ = ("bits", "mask", "count", "capacity")

    def __init__(self, capacity: int, fpr: float) -> None:
        capacity = max(1, capacity)
        # (1 - e^(-K n / m))^K = fpr, solved for m
        need = math.ceil(-K * capacity / math.log(1 - fpr ** (1 / K)))
        m = min(_MAX_BITS, 1 << max(6, (need - 1).bit_length()))
        self.mask = m - 1
        self.bits = bytearray(m // 8)
        self.count = 0
        self.capacity = capacity

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
        self._filters: dict[int, list[BloomFilter]] = {}  # slice start -> its filters
        self._all: list[BloomFilter] = []  # every live filter
        self._probes: list[tuple[bytearray, int]] = []  # (bits, mask) of each, probed in order
        self._last: tuple[int, BloomFilter] | None = None  # where the last id went

    def add(self, h: Probes, start: int) -> None:
        """Add an item seen in the slice that starts at `start`."""
        last = self._last
        if last is None or last[0] != start or last[1].count >= last[1].capacity:
            filters = self._filters.setdefault(start, [])
            if not filters or filters[-1].full:
                n = len(filters)
                bloom = BloomFilter(self._capacity << n, self._fpr / 2 ** (n + 1))
                filters.append(bloom)
                self._all.append(bloom)
                self._probes.append((bloom.bits, bloom.mask))
            last = self._last = (start, filters[-1])
        bloom = last[1]
        bits, mask = bloom.bits, bloom.mask
        a, b, c, d = h
        a &= mask
        bits[a >> 3] |= 1 << (a & 7)
        b &= mask
        bits[b >> 3] |= 1 << (b & 7)
        c &= mask
        bits[c >> 3] |= 1 << (c & 7)
        d &= mask
        bits[d >> 3] |= 1 << (d & 7)
        bloom.count += 1

    def __contains__(self, h: Probes) -> bool:
        a, b, c, d = h
        for bits, mask in self._probes:
            p = a & mask
            if not bits[p >> 3] & (1 << (p & 7)):
                continue
            p = b & mask
            if not bits[p >> 3] & (1 << (p & 7)):
                continue
            p = c & mask
            if not bits[p >> 3] & (1 << (p & 7)):
                continue
            p = d & mask
            if bits[p >> 3] & (1 << (p & 7)):
                return True
        return False

    def drop_before(self, start: int) -> None:
        """Forget the generations of slices that start before `start` (a slice start)."""
        doomed = [s for s in self._filters if s < start]
        for s in doomed:
            del self._filters[s]
        if doomed:
            self._all = [b for filters in self._filters.values() for b in filters]
            self._probes = [(b.bits, b.mask) for b in self._all]
            self._last = None

    @property
    def slices(self) -> int:
        """How many slices of event time hold a generation (what the memory grows with)."""
        return len(self._filters)

    @property
    def bytes(self) -> int:
        return sum(len(b.bits) for b in self._all)
