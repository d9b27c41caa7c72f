"""What an input partition knows of itself as its records are handled: its position and count,
its watermark fed by what is read (leaving out records from the future), which records of a
run are stamped beyond the skew allowance, and the record a message carries. (A run against
records one by one: tests/unit/streaming/test_task.py.)"""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from framework.core.pipeline import BoundedOutOfOrderness
from framework.core.watermarks import BoundedLateness, Unwatermarked
from framework.errors import BadRecord
from framework.streaming.input_partition import (
    NOT_AHEAD,
    Ahead,
    InputPartition,
    undecodable_replay,
)

WALL = 1_000  # the wall clock, in ms; a record past WALL + FUTURE is from the future
FUTURE = 100


def _msgs(*timestamps: int, first: int = 10) -> list[Message]:
    return [
        Message(topic="t", partition=2, offset=first + i, value=b"{}", timestamp=(1, ts))
        for i, ts in enumerate(timestamps)
    ]


def _bounded() -> InputPartition:
    policy = BoundedOutOfOrderness(ms=5, max_future_ms=FUTURE)
    watermark = BoundedLateness(policy, clock=lambda: 0.0, wall=lambda: WALL)
    return InputPartition("t", 2, "s", lambda raw: raw, watermark, [])


def test_a_record_consumed_moves_the_position_past_it_counts_it_and_feeds_the_watermark():
    inp = _bounded()
    for msg in _msgs(300, 200):
        inp.consumed(msg)
    assert (inp.position, inp.read) == (12, 2)
    assert inp.watermark.value() == (295, False)


def test_a_run_feeds_the_watermark_the_largest_timestamp_it_is_given():
    inp = _bounded()
    inp.consumed_run(_msgs(300, 900, 200), top=400)
    assert (inp.position, inp.read) == (13, 3)
    assert inp.watermark.value() == (395, False)


def test_a_run_with_records_from_the_future_feeds_the_watermark_only_the_others():
    inp = _bounded()
    inp.consumed_run(_msgs(100, WALL + FUTURE + 1, 200))
    assert inp.watermark.value() == (195, False)
    assert (inp.position, inp.read) == (13, 3)


def test_a_watermark_that_ignores_what_is_read_still_moves_the_position():
    inp = InputPartition("t", 2, "s", bytes, Unwatermarked(), [])
    inp.consumed_run(_msgs(100, 200))
    assert (inp.position, inp.read, inp.watermark.value()) == (12, 2, (None, False))


def test_only_a_bounded_source_has_records_from_the_future():
    inp = InputPartition("t", 2, "s", bytes, Unwatermarked(), [])
    assert inp.future(_msgs(10**15)) is NOT_AHEAD


def test_a_run_within_the_allowance_has_nothing_ahead_and_its_largest_timestamp():
    limit = WALL + FUTURE
    assert _bounded().future(_msgs(300, limit, 200)) == Ahead(frozenset(), limit, limit)


def test_records_past_the_allowance_are_named_by_offset_and_left_out_of_the_top():
    limit = WALL + FUTURE
    ahead = _bounded().future(_msgs(300, limit + 1, 200, 10**15, limit))
    assert ahead == Ahead(frozenset({11, 13}), limit, limit)  # the allowance's edge is in it


def test_a_run_all_from_the_future_has_no_top():
    limit = WALL + FUTURE
    assert _bounded().future(_msgs(limit + 1, limit + 2)) == Ahead(frozenset({10, 11}), None, limit)


def test_a_record_is_at_its_timestamp_or_where_it_is_filed_and_named_by_where_it_was_read():
    inp = InputPartition("t", 2, "s", lambda raw: raw.decode(), Unwatermarked(), [])
    msg = Message(topic="t", partition=2, offset=7, key=b"k", value=b"v", timestamp=(1, 50))
    record = inp.record(msg)
    assert (record.key, record.value, record.timestamp, record.stream) == ("k", "v", 50, "s")
    assert record.id == "t/2/7"
    assert inp.record(msg, filed=1_100).timestamp == 1_100


def test_a_record_with_an_id_header_keeps_that_id():
    inp = InputPartition("t", 2, "s", bytes, Unwatermarked(), [])
    msg = Message(topic="t", partition=2, offset=7, value=b"", headers=[("logwheel.id", b"x-1")])
    assert inp.record(msg).id == "x-1"


def test_a_replay_partitions_own_decoder_refuses_at_stage_replay():
    with pytest.raises(BadRecord) as refused:
        undecodable_replay(b"{}")
    assert refused.value.stage == "replay"
