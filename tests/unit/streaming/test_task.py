"""What a task knows of an input partition after a run of its records."""

from __future__ import annotations

from confluent_kafka import Message

from framework.core.pipeline import BoundedOutOfOrderness
from framework.core.watermarks import BoundedLateness, Published
from framework.streaming.task import InputPartition


def _msgs(*timestamps: int) -> list[Message]:
    return [
        Message(topic="t", partition=0, offset=10 + i, value=b"{}", timestamp=(1, ts))
        for i, ts in enumerate(timestamps)
    ]


def _partition(watermark) -> InputPartition:
    return InputPartition("t", 0, "t", lambda raw: raw, watermark, [])


def test_a_run_moves_the_position_and_the_watermark_as_its_records_one_by_one_would():
    one, run = (
        _partition(BoundedLateness(BoundedOutOfOrderness(ms=5), clock=lambda: 0.0))
        for _ in range(2)
    )
    msgs = _msgs(100, 300, 200)
    for msg in msgs:
        one.consumed(msg)
    run.consumed_run(msgs)
    assert (run.position, run.read) == (one.position, one.read) == (13, 3)
    assert run.watermark.value() == one.watermark.value() == (295, False)


def test_a_watermark_that_ignores_what_is_read_is_not_shown_it():
    inp = _partition(Published("t", 0, ["upstream"]))
    assert not inp._observes
    inp.consumed_run(_msgs(100))
    assert inp.position == 11
