"""Where `dlq replay` sends a dead letter back, and what it sends: pure, no broker."""

from __future__ import annotations

import json

import pytest

from framework.core.api import Computation
from framework.core.pipeline import Pipeline, key_by
from framework.errors import BadRecord
from framework.kafka.partitioning import key_partition
from framework.kafka.replays import REPLAY_OF, REPLAY_STREAM
from framework.ops.dead_letter_log import DeadLetter
from framework.ops.replay import Selection
from framework.ops.replay_routing import Router, replay_record, replayed_record


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def spec():
    p = Pipeline("p", partitions=4)
    p.source("clicks")
    p.source("views")
    p.computation("c", Noop, inputs={"clicks": key_by("user"), "views": None})
    return p, p["c"]


def letter(source: str, key: bytes | None, value: bytes | None, *, partition=2, extra=()):
    headers = (
        ("logwheel.error", b"ValueError: boom"),
        ("logwheel.error.stage", b"process_record"),
        ("logwheel.source.topic", source.encode()),
        ("logwheel.source.partition", str(partition).encode()),
        ("logwheel.source.offset", b"17"),
        ("trace", b"abc"),
        *extra,
    )
    return DeadLetter("p.c.dlq", 0, 5, key, value, 1234, headers, "process_record",
                      "ValueError: boom", source, partition, 17, None)  # fmt: skip


def test_an_input_read_by_its_kafka_key_goes_back_to_its_partition_with_its_key():
    pipeline, c = spec()
    routed = Router(pipeline, c).route(letter("views", b"v1", b"{}"))
    assert (routed.stream, routed.key, routed.partition) == ("views", b"v1", 2)
    assert routed.record_id == "views/2/17"  # the id its first reading gave it


def test_a_re_keyed_input_is_keyed_again_by_the_current_extractor():
    pipeline, c = spec()
    value = json.dumps({"user": "ann"}).encode()
    for source in ("clicks", "p.c.clicks.by-key"):
        routed = Router(pipeline, c).route(letter(source, b"kafka-key", value))
        assert (routed.stream, routed.key) == ("clicks", b"kafka-key")  # keyed by the task
        assert routed.partition == key_partition("ann", 4)
    with_id = letter("p.c.clicks.by-key", b"ann", value, extra=(("logwheel.id", b"id-9"),))
    assert Router(pipeline, c).route(with_id).record_id == "id-9"


def test_a_replayed_record_that_failed_again_goes_back_through_the_stream_it_names():
    pipeline, c = spec()
    named = ((REPLAY_STREAM, b"views"), (REPLAY_OF, b"p.c.dlq/0/1"))
    routed = Router(pipeline, c).route(letter("p.c.replay", b"v1", b"{}", partition=3, extra=named))
    assert (routed.stream, routed.key, routed.partition) == ("views", b"v1", 3)


def test_what_cannot_go_back_says_why_and_what_still_fails_raises():
    pipeline, c = spec()
    router = Router(pipeline, c)
    assert "no input of c" in router.route(letter("elsewhere", b"k", b"{}"))
    assert "a timer's firing" in router.route(letter("", b"k", b"{}"))
    cut = letter("views", b"k", b"{", extra=(("logwheel.error.truncated", b"99"),))
    assert "cut" in router.route(cut)
    with pytest.raises(BadRecord) as raised:
        router.route(letter("clicks", b"k", b"not json"))
    assert raised.value.stage == "decode"
    with pytest.raises(BadRecord) as raised:
        router.route(letter("clicks", b"k", json.dumps({"no": "user"}).encode()))
    assert raised.value.stage == "key"


def test_the_replay_record_keeps_the_original_and_names_what_it_replays():
    pipeline, c = spec()
    dead = letter(
        "p.c.clicks.by-key", b"ann", b'{"user": "ann"}', extra=(("logwheel.id", b"id-9"),)
    )
    routed = Router(pipeline, c).route(dead)
    topic, key, value, partition, timestamp, headers = replay_record(c, dead, routed)
    assert (topic, key, value, partition, timestamp) == (
        "p.c.replay", b"ann", b'{"user": "ann"}', key_partition("ann", 4), 1234,
    )  # fmt: skip
    assert headers == [
        ("logwheel.id", b"id-9"),
        (REPLAY_OF, b"p.c.dlq/0/5"),
        (REPLAY_STREAM, b"clicks"),
        ("trace", b"abc"),
    ]  # no error headers: they were the dead letter's
    topic, key, value, partition, _, _ = replayed_record(c, dead, {"stream": "clicks"})
    assert (topic, key, partition) == ("p.c.replayed", b"p.c.dlq/0/5", 0)
    assert json.loads(value)["stream"] == "clicks"


def test_a_selection_by_stage_reason_and_time():
    dead = letter("views", b"k", b"{}")  # stage process_record, reason "ValueError: boom", 1234
    assert Selection().matches(dead)
    assert Selection(stage="process_record", reason="boom", since=1234, until=1235).matches(dead)
    assert not Selection(stage="decode").matches(dead)
    assert not Selection(reason="KeyError").matches(dead)
    assert not Selection(since=1235).matches(dead)
    assert not Selection(until=1234).matches(dead)
