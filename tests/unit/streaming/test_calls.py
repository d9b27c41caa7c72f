"""The call slot, the file through which a process that may die holding the GIL leaves the
call it is in: what one write leaves for a reader of the file whatever was written before,
and what a file that names no call reads as. (`DurableCalls` writing its calls through it:
tests/unit/streaming/test_watchdog.py.)"""

from __future__ import annotations

import stat
import struct

from confluent_kafka import Message

from framework.core.api import Timer
from framework.streaming.calls import SLOT_BYTES, CallSlot, DurableCalls


def _msg(topic: str, partition: int, offset: int) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, value=b"")


def test_each_write_replaces_the_call_whatever_was_written_before(tmp_path):
    path = tmp_path / "slot"
    slot = CallSlot(path)
    slot.write(_msg("a-long-topic-name", 2, 10))
    assert CallSlot.read(path) == ("record", "a-long-topic-name", 2, 10)
    slot.write(_msg("in", 0, 7))  # shorter: the rest of the longer name is no part of it
    assert CallSlot.read(path) == ("record", "in", 0, 7)
    slot.write(("k", Timer(3, "t", "event")))
    assert CallSlot.read(path) == ("timer", "k", "t", 3, "event")
    slot.write(_msg("a-long-topic-name", 2, 11))
    assert CallSlot.read(path) == ("record", "a-long-topic-name", 2, 11)
    slot.write(None)
    assert CallSlot.read(path) is None
    slot.close()


def test_the_slot_is_a_private_file_of_its_size(tmp_path):
    CallSlot(tmp_path / "slot").close()
    info = (tmp_path / "slot").stat()
    assert info.st_size == SLOT_BYTES and stat.S_IMODE(info.st_mode) == 0o600


def test_a_timer_too_long_for_the_slot_reads_as_no_call_not_a_wrong_one(tmp_path):
    slot = CallSlot(tmp_path / "slot")
    slot.write(("k" * SLOT_BYTES, Timer(3, "t", "event")))
    assert CallSlot.read(tmp_path / "slot") is None
    slot.close()


def test_a_file_that_names_no_call_whole_reads_as_none(tmp_path):
    path = tmp_path / "slot"
    assert CallSlot.read(path) is None  # missing
    path.write_bytes(b"\x03\x00")  # shorter than a head
    assert CallSlot.read(path) is None
    path.write_bytes(struct.pack("<qqq", 10, 0, 5) + b"in")  # the name cut short
    assert CallSlot.read(path) is None
    timer = b'["k","t",3,"event"]'
    path.write_bytes(struct.pack("<qqq", -len(timer) - 1, 0, 0) + timer)  # cut short
    assert CallSlot.read(path) is None
    path.write_bytes(struct.pack("<qqq", -5, 0, 0) + b"[1,2]")  # a timer of another shape
    assert CallSlot.read(path) is None
    path.write_bytes(struct.pack("<qqq", 2, 0, 5) + b"\xff\xfe")  # a name that is no text
    assert CallSlot.read(path) is None
    path.write_bytes(struct.pack("<qqq", 2, 1, 5) + b"in")
    assert CallSlot.read(path) == ("record", "in", 1, 5)


def test_durable_calls_count_rounds_and_hold_the_call_as_plain_calls_do(tmp_path):
    calls = DurableCalls(CallSlot(tmp_path / "slot"))
    assert calls.calling is None and calls.rounds == 0
    msg = _msg("in", 0, 3)
    calls.calling = msg
    calls.rounds += 1
    assert calls.calling is msg and calls.rounds == 1
    assert CallSlot.read(tmp_path / "slot") == ("record", "in", 0, 3)
    calls.slot.close()
