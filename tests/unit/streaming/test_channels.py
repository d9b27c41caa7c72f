"""Watermark channels with stand-in clients: a published mark reaches the partitions that wait
for it and is kept for later ones; one no writer could have published (ahead of wall time,
beyond a partition's end, not naming its reader, undecodable) is refused once and never
applied. Reading a channel to its end behind open transactions: tests/integration/
test_takeover.py."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

from confluent_kafka import Message

from framework.core.watermarks import Mark, Published, encode_mark
from framework.streaming.channels import WatermarkChannels

CHANNEL = "p.up.watermarks"
PRODUCER = "up/task/0"
WALL = 1_000_000


class ChannelConsumer:
    """Hands out what a test published, in order."""

    def __init__(self) -> None:
        self.published: list[Message] = []
        self._unread: list[Message] = []
        self.assigned: list[tuple[str, int, int]] = []
        self.closed = False

    def publish(self, key: str, value: bytes | None) -> None:
        offset = len(self.published)
        msg = Message(topic=CHANNEL, partition=0, offset=offset, key=key.encode(), value=value)
        self.published.append(msg)
        self._unread.append(msg)

    def again(self) -> None:
        """Read the channel again from its start (as a catch-up does)."""
        self._unread = list(self.published)

    def incremental_assign(self, tps):
        self.assigned += [(t.topic, t.partition, t.offset) for t in tps]

    def consume(self, num_messages, timeout):
        out, self._unread = self._unread[:num_messages], self._unread[num_messages:]
        return out

    def close(self):
        self.closed = True


class EndsAdmin:
    """Partitions end where `ends` says; each question is counted."""

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = ends
        self.asked: list[list[tuple[str, int]]] = []

    def list_offsets(self, request, **kwargs):
        self.asked.append(sorted((tp.topic, tp.partition) for tp in request))
        answers = {}
        for tp in request:
            answers[tp] = future = Future()
            future.set_result(SimpleNamespace(offset=self.ends[(tp.topic, tp.partition)]))
        return answers


def _channels(ends=None, refused=None):
    consumer, admin = ChannelConsumer(), EndsAdmin(ends or {("in", 0): 10, ("in", 1): 10})
    refused = [] if refused is None else refused
    channels = WatermarkChannels(
        consumer,
        admin,
        allowance_ms=1_000,
        counts={"in": 2},
        refuse=lambda msg, forged: refused.append((msg.offset(), forged.stage, str(forged))),
        wall=lambda: WALL,
    )
    channels.follow([CHANNEL])
    return channels, consumer, admin, refused


def _mark(watermark: int, offsets: dict[tuple[str, int], int] | None = None) -> bytes:
    named = {("in", 0): 4, ("in", 1): -1} if offsets is None else offsets
    return encode_mark(Mark(PRODUCER, watermark, False, named))


def _listener(partition: int = 0) -> Published:
    published = Published("in", partition, [PRODUCER])
    published.advance(5)  # read past offset 4, the one the marks name
    return published


def test_a_mark_reaches_the_partitions_waiting_for_it_and_is_kept_for_later_ones():
    channels, consumer, _, refused = _channels()
    assert consumer.assigned == [(CHANNEL, 0, -2)]  # from the channel's beginning
    waiting = _listener()
    channels.listen([CHANNEL], waiting)
    consumer.publish(PRODUCER, _mark(WALL - 5_000))
    assert channels.poll() == 1
    assert waiting.value() == (WALL - 5_000, False)
    assert channels.latest(CHANNEL, PRODUCER).watermark == WALL - 5_000
    later = _listener(1)
    channels.listen([CHANNEL], later)  # offered the kept mark at once
    assert later.value() == (WALL - 5_000, False)
    channels.follow([CHANNEL])
    assert len(consumer.assigned) == 1  # a channel followed already is not assigned again
    assert refused == []


def test_a_channel_named_twice_at_once_is_assigned_once():
    # a join's two inputs, written by one injector (or one computation), share its channel;
    # librdkafka refuses an assignment that names a partition twice
    channels, consumer, _, _ = _channels()
    channels.follow(["p.gen.watermarks", "p.gen.watermarks"])
    assert consumer.assigned == [(CHANNEL, 0, -2), ("p.gen.watermarks", 0, -2)]


def test_a_mark_ahead_of_wall_time_is_refused_once_and_never_applied():
    channels, consumer, _, refused = _channels()
    waiting = _listener()
    channels.listen([CHANNEL], waiting)
    consumer.publish(PRODUCER, _mark(WALL + 1_001))  # beyond the allowance of 1 s
    channels.poll()
    consumer.again()
    channels.poll()  # the same record read again: not refused twice
    assert [(offset, stage) for offset, stage, _ in refused] == [(0, "watermark")]
    assert "ahead of wall time" in refused[0][2]
    assert waiting.value() == (None, False) and channels.latest(CHANNEL, PRODUCER) is None


def test_a_mark_naming_an_offset_beyond_a_partitions_end_is_refused():
    channels, consumer, admin, refused = _channels()
    waiting = _listener()
    channels.listen([CHANNEL], waiting)
    consumer.publish(PRODUCER, _mark(WALL, {("in", 0): 10, ("in", 1): -1}))  # the end is 10
    channels.poll()
    assert len(refused) == 1 and "beyond its end (10)" in refused[0][2]
    assert waiting.value() == (None, False)
    assert admin.asked == [[("in", 0)]]  # the end asked for the partition the mark names


def test_ends_are_asked_only_beyond_the_ends_known_and_never_outside_the_topic():
    channels, consumer, admin, refused = _channels()
    consumer.publish(PRODUCER, _mark(WALL, {("in", 0): 4, ("in", 1): -1}))
    consumer.publish(PRODUCER, _mark(WALL, {("in", 0): 6, ("in", 1): -1}))
    channels.poll()  # one question for the batch: in[0] ends at 10
    consumer.publish(PRODUCER, _mark(WALL, {("in", 0): 9, ("in", 1): -1}))
    channels.poll()  # within the end known: not asked again
    assert admin.asked == [[("in", 0)]] and refused == []
    consumer.publish(PRODUCER, _mark(WALL, {("in", 0): 4, ("in", 7): 0}))  # no partition 7
    channels.poll()
    assert admin.asked == [[("in", 0)]] and "in[7]" in refused[0][2]


def test_a_mark_that_does_not_name_its_reader_is_refused_for_it():
    channels, consumer, _, refused = _channels()
    waiting = _listener(1)
    channels.listen([CHANNEL], waiting)
    consumer.publish(PRODUCER, _mark(WALL, {("in", 0): 4}))  # names no offset of in[1]
    channels.poll()
    assert len(refused) == 1 and "names no offset of in[1]" in refused[0][2]
    assert waiting.value() == (None, False)


def test_a_kept_mark_that_does_not_name_a_later_reader_is_dropped_and_refused():
    channels, consumer, _, refused = _channels()
    consumer.publish(PRODUCER, _mark(WALL, {("in", 0): 4}))
    channels.poll()
    assert channels.latest(CHANNEL, PRODUCER) is not None and refused == []
    channels.listen([CHANNEL], _listener(1))
    assert channels.latest(CHANNEL, PRODUCER) is None
    assert len(refused) == 1 and "names no offset of in[1]" in refused[0][2]


def test_an_undecodable_mark_is_refused_and_a_tombstone_forgets_its_producer():
    channels, consumer, _, refused = _channels()
    consumer.publish(PRODUCER, b"\x00not a mark")
    consumer.publish(PRODUCER, _mark(WALL))
    channels.poll()
    assert [(offset, stage) for offset, stage, _ in refused] == [(0, "watermark")]
    assert "undecodable" in refused[0][2]
    assert channels.latest(CHANNEL, PRODUCER) is not None
    consumer.publish(PRODUCER, None)  # the producer's event time was reset
    channels.poll()
    assert channels.latest(CHANNEL, PRODUCER) is None


def test_a_forgotten_partition_is_offered_nothing_more():
    channels, consumer, _, _ = _channels()
    waiting = _listener()
    channels.listen([CHANNEL], waiting)
    consumer.publish(PRODUCER, _mark(WALL - 9_000))
    channels.poll()
    channels.forget(waiting)
    consumer.publish(PRODUCER, _mark(WALL - 1_000))
    channels.poll()
    assert waiting.value() == (WALL - 9_000, False)
    channels.close()
    assert consumer.closed
