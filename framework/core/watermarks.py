"""Low watermarks: what a task knows about the timestamps of its future input.

Every task publishes `min(input low watermark, earliest pending event-time timer)` to its
computation's compacted watermark channel, in the same transaction as its outputs, together
with the last offset this process wrote to each output partition. A reader of partition q of a
stream applies a producer's watermark only once it has read q past that offset (invariant 4),
so a watermark can never overtake the data it speaks for. The input watermark of a partition is
the minimum over every expected producer; none is known until each has reported.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.pipeline import BoundedOutOfOrderness, InjectorWatermark, Pipeline
from framework.serde.catalogue import decoder_for, encoder_for

WATERMARK_SCHEMA = "logwheel.Watermark"
Offsets = dict[tuple[str, int], int]


@dataclass(frozen=True, slots=True)
class Mark:
    """One published watermark: a producer's promise about its future records."""

    producer: str
    watermark: int
    idle: bool
    offsets: Offsets
    input_watermark: int = MIN_TIME
    read: int = 0  # how far the producer has read its input: its weight's growth
    percentile_late: int = 0  # records a task took as late only by its percentile watermark

    @property
    def state(self) -> tuple[int, bool, int, int, int]:
        """What it promises and reports, offsets aside: a new mark is due when this moves."""
        return self.watermark, self.idle, self.input_watermark, self.read, self.percentile_late

    @classmethod
    def of(
        cls,
        producer: str,
        watermark: int,
        idle: bool,
        written: Offsets,
        outputs: Iterable[str],
        input_watermark: int = MIN_TIME,
        read: int = 0,
        percentile_late: int = 0,
        partitions: Mapping[str, int] | None = None,
    ) -> Mark:
        """The mark a producer publishes: with the last offset it wrote to each partition of
        its outputs (`written` holds every topic the process wrote), and -1 for each other
        partition of them (`partitions`: topic -> count): readers refuse a mark that does not
        name their partition (framework/core/forgery.py)."""
        outputs = set(outputs)
        offsets = {tp: o for tp, o in written.items() if tp[0] in outputs}
        named = naming_all(offsets, outputs, partitions or {})
        return cls(producer, watermark, idle, named, input_watermark, read, percentile_late)


def naming_all(offsets: Offsets, outputs: Iterable[str], partitions: Mapping[str, int]) -> Offsets:
    """`offsets` with -1 (nothing written) for each partition of `outputs` it does not name."""
    named = dict(offsets)
    for topic in outputs:
        for p in range(partitions.get(topic, 0)):
            named.setdefault((topic, p), -1)
    return named


def encode_mark(mark: Mark) -> bytes:
    return _encode(
        {
            "producer": mark.producer,
            "watermark": mark.watermark,
            "idle": mark.idle,
            "input_watermark": mark.input_watermark,
            "read": mark.read,
            "percentile_late": mark.percentile_late,
            "offsets": [
                {"topic": t, "partition": p, "offset": o} for (t, p), o in mark.offsets.items()
            ],
        }
    )


def decode_mark(raw: bytes) -> Mark:
    v = _decode(raw)
    offsets = {(o["topic"], o["partition"]): o["offset"] for o in v["offsets"]}
    return Mark(
        v["producer"],
        v["watermark"],
        v["idle"],
        offsets,
        v["input_watermark"],
        v["read"],
        v["percentile_late"],
    )


_encode = encoder_for(WATERMARK_SCHEMA)
_decode = decoder_for(WATERMARK_SCHEMA)


def task_producer(computation: str, partition: int) -> str:
    """Producer id of a computation's keyed task, unique within a pipeline."""
    return f"{computation}/task/{partition}"


def repartition_producer(computation: str, stream: str, partition: int) -> str:
    """Producer id of the task that re-keys partition `partition` of `stream`."""
    return f"{computation}/by-key/{stream}/{partition}"


def injector_producer(injector: str, process: int) -> str:
    return f"{injector}/injector/{process}"


# -- what one input partition knows ---------------------------------------------------------


class PartitionWatermark:
    """Input low watermark of one topic-partition as its reader has read it."""

    def value(self) -> tuple[int | None, bool]:
        """(watermark or None when unknown, idle)."""
        raise NotImplementedError

    def advance(self, position: int) -> None:
        """The reader's next offset to read on this partition is now `position`."""

    def observe(self, timestamp: int) -> None:
        """A record with this timestamp was read."""


class Unwatermarked(PartitionWatermark):
    """A source declared without a watermark policy: its watermark is never known."""

    def value(self) -> tuple[int | None, bool]:
        return None, False


class BoundedLateness(PartitionWatermark):
    """`BoundedOutOfOrderness` on one partition of a stream written from outside; once the
    partition is silent for `idle_ms`, it stops counting (idle), or, `live`, follows wall time
    less the bound. A record stamped beyond wall time plus `max_future_ms` is not seen at all
    (core/future_records.py): it moves nothing and breaks no silence, so a partition that
    carries only such records is idle like an empty one — it neither holds the watermark
    back past `idle_ms` nor pushes it forward. A partition with records its reader has not
    read yet (`unread`: its log goes on past the read position, or the reader holds fetched
    records back) is behind, not silent: were it idle, the other partitions would move the
    watermark past records already written to it, and those would come late."""

    def __init__(
        self,
        policy: BoundedOutOfOrderness,
        clock: Callable[[], float],
        wall: Callable[[], int] = now_ms,
    ) -> None:
        self._bound = policy.ms
        self._idle_s = policy.idle_ms / 1000
        self._live = policy.live
        self._max_future = policy.max_future_ms
        self._clock = clock
        self._wall = wall
        self._max_ts: int | None = None
        self._last_seen: float | None = None  # silence counts from when reading starts
        self.unread: Callable[[], bool] = _nothing_unread  # the reader says (streaming)

    def future_limit(self) -> int:
        """The largest timestamp that may move the watermark now; above it, a record is in
        the future (a skewed or hostile producer's clock)."""
        return self._wall() + self._max_future

    def observe(self, timestamp: int) -> None:
        if timestamp > self._max_future + self._wall():
            return
        if self._max_ts is None or timestamp > self._max_ts:
            self._max_ts = timestamp
        self._last_seen = self._clock()

    def value(self) -> tuple[int | None, bool]:
        now = self._clock()
        if self._last_seen is None:
            self._last_seen = now
        if now - self._last_seen >= self._idle_s:
            if self.unread():
                self._last_seen = now  # behind: the silence starts again once caught up
            elif not self._live:
                return None, True
            else:
                # as if a record stamped now had just arrived: producers stamp the current time
                wall = self._wall()
                self._max_ts = wall if self._max_ts is None else max(wall, self._max_ts)
        return (None if self._max_ts is None else self._max_ts - self._bound), False


def _nothing_unread() -> bool:
    return False


@dataclass(slots=True)
class _Producer:
    pending: deque[tuple[int, int, bool]] = field(default_factory=deque)
    applied: tuple[int, bool] | None = None


class Published(PartitionWatermark):
    """Watermarks published by a known set of producers (upstream tasks or injectors)."""

    def __init__(self, topic: str, partition: int, producers: Iterable[str]) -> None:
        self.topic = topic
        self.partition = partition
        self._producers = {p: _Producer() for p in producers}
        self._position = 0

    @property
    def producers(self) -> list[str]:
        return list(self._producers)

    def offer(self, mark: Mark) -> None:
        producer = self._producers.get(mark.producer)
        if producer is None:
            return
        required = mark.offsets.get((self.topic, self.partition), -1)
        producer.pending.append((required, mark.watermark, mark.idle))
        self._apply(producer)

    def advance(self, position: int) -> None:
        self._position = position
        for producer in self._producers.values():
            if producer.pending:
                self._apply(producer)

    def _apply(self, producer: _Producer) -> None:
        pending = producer.pending
        while pending and pending[0][0] < self._position:
            _, watermark, idle = pending.popleft()
            if producer.applied is not None and not idle:
                watermark = max(watermark, producer.applied[0])
            producer.applied = (watermark, idle)

    def value(self) -> tuple[int | None, bool]:
        return combine(p.applied or (None, False) for p in self._producers.values())


def combine(values: Iterable[tuple[int | None, bool]]) -> tuple[int | None, bool]:
    """Minimum over the non-idle inputs; unknown if any of them is unknown; idle if all are."""
    low: int | None = None
    any_active = False
    for watermark, idle in values:
        if idle:
            continue
        if watermark is None:
            return None, False
        any_active = True
        low = watermark if low is None else min(low, watermark)
    return (low, False) if any_active else (None, True)


def partition_watermark(
    pipeline: Pipeline,
    stream: str,
    topic: str,
    partition: int,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[PartitionWatermark, list[str]]:
    """How a reader of `topic`/`partition` (carrying `stream`) learns its watermark, and the
    watermark channels it must follow for that."""
    source = pipeline.sources.get(stream)
    if source is not None:
        policy = source.watermark
        if isinstance(policy, BoundedOutOfOrderness):
            return BoundedLateness(policy, clock), []
        if isinstance(policy, InjectorWatermark):
            producers = [injector_producer(policy.injector, i) for i in range(policy.processes)]
            return Published(topic, partition, producers), pipeline.channels_of(stream)
        return Unwatermarked(), []
    producers = [
        task_producer(writer.name, p)
        for writer in pipeline.writers(stream)
        for p in range(writer.partitions)
    ]
    return Published(topic, partition, producers), pipeline.channels_of(stream)
