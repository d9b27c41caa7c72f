"""The partitions a task reads, and what each knows of itself: its position, its watermark,
records from the future, and the records the pacer holds back (streaming/pacing.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from confluent_kafka import Message

from framework.core.api import Record
from framework.core.watermarks import BoundedLateness, PartitionWatermark
from framework.errors import BadRecord
from framework.kafka.record_decoding import decode_record
from framework.kafka.replays import ReplayedRecords


class Ahead(NamedTuple):
    """What `InputPartition.future` finds in a run: the offsets of its records stamped beyond
    the skew allowance, the largest timestamp of the others (None: not computed, or none),
    and the allowance's limit, the time those records are filed under."""

    far: frozenset[int]
    top: int | None
    limit: int


NOT_AHEAD = Ahead(frozenset(), None, 0)


@dataclass(eq=False)
class InputPartition:
    """One topic-partition a task reads, and what it knows of that partition's watermark."""

    topic: str
    partition: int
    stream: str
    decode: Callable[[bytes], Any]
    watermark: PartitionWatermark
    channels: list[str]
    position: int = 0  # next offset to read
    read: int = 0  # records read, for metrics
    paused: bool = False  # held at `position` until a service answers (streaming/holds.py)
    frozen: tuple[int | None, bool] | None = None  # the watermark while held, else None
    # fetched, not yet handled: held back by the pacer until the task's other inputs catch
    # up in event time (streaming/pacing.py); `throttled`: fetching paused meanwhile
    parked: list[Message] = field(default_factory=list)
    throttled: bool = False
    front: int | None = None  # the largest timestamp handled through the pacer

    def consumed(self, msg: Message) -> None:
        self.position = msg.offset() + 1
        self.read += 1
        self.watermark.observe(msg.timestamp()[1])

    def consumed_run(self, msgs: list[Message], top: int | None = None) -> None:
        """`consumed` for a run of this partition's records, in offset order (`top`: the
        largest timestamp among them within the skew allowance, if known)."""
        self.position = msgs[-1].offset() + 1
        self.read += len(msgs)
        if self._observes:
            if top is None:
                top = max(m.timestamp()[1] for m in msgs)
                if self._bounded and top > self.watermark.future_limit():
                    for m in msgs:  # rare: the watermark leaves out those from the future
                        self.watermark.observe(m.timestamp()[1])
                    return
            self.watermark.observe(top)

    def future(self, msgs: list[Message]) -> Ahead:
        """Which records of a run are stamped beyond the source's skew allowance
        (`BoundedOutOfOrderness.max_future_ms`; none but for such a source)."""
        if not self._bounded:
            return NOT_AHEAD
        top = max(m.timestamp()[1] for m in msgs)
        limit = self.watermark.future_limit()
        if top <= limit:
            return Ahead(frozenset(), top, limit)
        far = frozenset(m.offset() for m in msgs if m.timestamp()[1] > limit)
        within = [m.timestamp()[1] for m in msgs if m.offset() not in far]
        return Ahead(far, max(within) if within else None, limit)

    def __post_init__(self) -> None:
        self.id_prefix = f"{self.topic}/{self.partition}/"
        # Most watermarks ignore what is read (they follow published marks or nothing).
        self._observes = type(self.watermark).observe is not PartitionWatermark.observe
        self._bounded = isinstance(self.watermark, BoundedLateness)

    def record(self, msg: Message, filed: int | None = None) -> Record:
        """The record `msg` carries, at its timestamp or at `filed` (one from the future:
        core/future_records.py); BadRecord (stage "decode") if its key, value or id header
        cannot be read."""
        return decode_record(
            self.decode,
            self.stream,
            msg.key(),
            msg.value(),
            msg.timestamp()[1] if filed is None else filed,
            msg.headers(),
            self.id_prefix,
            msg.offset(),
        )


@dataclass(eq=False)
class ReplayPartition(InputPartition):
    """A partition of the computation's replay topic: each record is one of the stream its
    header names (`ReplayedRecords`), at its own time; its watermark is none."""

    replayed: ReplayedRecords | None = None

    def record(self, msg: Message, filed: int | None = None) -> Record:
        assert self.replayed is not None
        return self.replayed.record(msg)


def undecodable_replay(value: bytes) -> Any:
    """A replay partition's decoder: its records are decoded as the stream each names."""
    raise BadRecord("replay", "a replayed record is decoded as one of the stream it names")
