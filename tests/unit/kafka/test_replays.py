"""How a keyed task reads a record of its replay topic (no broker)."""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from framework.core.api import Computation
from framework.core.pipeline import Pipeline, key_by
from framework.errors import BadRecord
from framework.kafka.partitioning import key_partition
from framework.kafka.replays import ReplayedRecords, ReplayWatermark


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def spec():
    p = Pipeline("p", partitions=4).source("clicks").source("views")
    return p, p.computation("c", Noop, inputs={"clicks": key_by("user"), "views": None})["c"]


def msg(partition: int, stream: bytes, key: bytes, value: bytes) -> Message:
    headers = [("logwheel.id", b"clicks/1/7"), ("logwheel.replay.stream", stream),
               ("logwheel.replay.of", b"p.c.dlq/0/3"), ("trace", b"t")]  # fmt: skip
    return Message(topic="p.c.replay", partition=partition, offset=5, key=key, value=value,
                   timestamp=(1, 1_000), headers=headers)  # fmt: skip


def test_a_replayed_record_is_one_of_its_stream_keyed_as_the_computation_keys_it():
    pipeline, c = spec()
    ann = key_partition("ann", 4)
    record = ReplayedRecords(pipeline, c, None, ann).record(
        msg(ann, b"clicks", b"kafka-key", b'{"user": "ann"}')
    )
    assert (record.key, record.value, record.timestamp) == ("ann", {"user": "ann"}, 1_000)
    assert (record.stream, record.id) == ("clicks", "clicks/1/7")
    view = ReplayedRecords(pipeline, c, None, 2).record(msg(2, b"views", b"v", b"{}"))
    assert (view.key, view.stream) == ("v", "views")  # read by its Kafka key: kept


def test_a_replayed_record_of_another_partition_or_stream_is_a_bad_record():
    pipeline, c = spec()
    elsewhere = (key_partition("ann", 4) + 1) % 4
    with pytest.raises(BadRecord, match="of partition") as raised:
        ReplayedRecords(pipeline, c, None, elsewhere).record(
            msg(elsewhere, b"clicks", b"k", b'{"user": "ann"}')
        )
    assert raised.value.stage == "replay"
    with pytest.raises(BadRecord, match="does not read") as raised:
        ReplayedRecords(pipeline, c, None, 0).record(msg(0, b"orders", b"k", b"{}"))
    assert raised.value.stage == "replay"
    with pytest.raises(BadRecord) as raised:
        ReplayedRecords(pipeline, c, None, 0).record(msg(0, b"clicks", b"k", b'{"no": 1}'))
    assert raised.value.stage == "key"


def test_the_replay_topic_holds_no_watermark_back():
    assert ReplayWatermark().value() == (None, True)
