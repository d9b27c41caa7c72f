"""The Kafka output: productions checked before a hook call counts as done, and the one
dead-letter path of every runtime — the policy decides, one function composes the dead letter
(the original key, value and headers, after the error headers)."""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from framework.core.api import Computation, Record
from framework.core.dead_letters import ErrorPolicy
from framework.core.pipeline import Pipeline
from framework.errors import BadRecord, Fatal
from framework.kafka.limits import RECORD_OVERHEAD, Limit, TopicLimits
from framework.kafka.output import (
    ERROR_HEADERS,
    TRUNCATED_HEADER,
    KafkaOutput,
    PartIO,
    dead_letter_record,
    foreign,
)
from tests.unit.kafka.fakes import fake_collector
from tests.unit.kafka.test_record_decoding import FORGED

DLQ = "p.c.dlq"
ERROR = ValueError("no good")


def source(value: bytes = b'{"v": 1}', timestamp: int = 1_000) -> Message:
    return Message(topic="in", partition=2, offset=7, key=b"k", value=value,
                   timestamp=(1, timestamp), headers=FORGED)  # fmt: skip


def as_dict(headers) -> dict[str, bytes]:
    return dict(headers)


def test_a_dead_letter_is_the_source_records_bytes_after_the_error_headers():
    topic, key, value, partition, timestamp, headers = dead_letter_record(
        DLQ, TopicLimits(), ERROR, "process_record", source(), Record("k", {}, 0)
    )
    assert (topic, key, value, partition, timestamp) == (DLQ, b"k", b'{"v": 1}', -1, 1_000)
    assert headers[: len(ERROR_HEADERS)] == [
        ("logwheel.error", b"ValueError: no good"),
        ("logwheel.error.stage", b"process_record"),
        ("logwheel.source.topic", b"in"),
        ("logwheel.source.partition", b"2"),
        ("logwheel.source.offset", b"7"),
    ]


def test_a_dead_letter_keeps_the_records_own_headers_but_none_of_logwheels_but_its_id():
    *_, headers = dead_letter_record(DLQ, TopicLimits(), ERROR, "decode", source(), None)
    assert headers[len(ERROR_HEADERS) :] == [("logwheel.id", b"order-7"), ("trace", b"abc")]
    assert [name for name, _ in headers].count("logwheel.error") == 1
    assert foreign(FORGED) == [("logwheel.id", b"order-7"), ("trace", b"abc")]
    assert foreign(None) == []


def test_a_value_too_large_for_the_dead_letter_topic_is_cut_to_fit_with_its_size_told():
    limits = TopicLimits({DLQ: Limit(max_bytes=1_000)})
    big = b"x" * 5_000
    _, key, value, _, _, headers = dead_letter_record(
        DLQ, limits, ERROR, "produce", source(big), None
    )
    assert as_dict(headers)[TRUNCATED_HEADER] == b"5000"
    assert big.startswith(value) and 0 < len(value) < 1_000
    size = len(key) + len(value) + RECORD_OVERHEAD
    size += sum(len(n) + len(v) + 8 for n, v in headers)  # as the limits count a record
    assert size <= 1_000
    _, _, fits, _, _, headers = dead_letter_record(
        DLQ, limits, ERROR, "produce", source(b"x" * 100), None
    )
    assert fits == b"x" * 100 and TRUNCATED_HEADER not in as_dict(headers)


def test_a_timestamp_the_dead_letter_topic_would_refuse_becomes_the_brokers_time():
    limits = TopicLimits({DLQ: Limit(after_ms=1_000, before_ms=1_000)})
    assert dead_letter_record(DLQ, limits, ERROR, "future", source(timestamp=5), None)[4] == 0
    assert dead_letter_record(DLQ, TopicLimits(), ERROR, "x", source(timestamp=-1), None)[4] == 0


def test_a_timers_dead_letter_is_its_record_as_json_with_no_source():
    timer = Record("ké", {"timer": "t", "time": 5}, 5, "<timer>", "id")
    _, key, value, _, timestamp, headers = dead_letter_record(
        DLQ, TopicLimits(), ERROR, "process_timer", None, timer
    )
    assert (key, value, timestamp) == ("ké".encode(), b'{"timer":"t","time":5}', 5)
    assert headers[2:] == [
        ("logwheel.source.topic", b""),
        ("logwheel.source.partition", b""),
        ("logwheel.source.offset", b""),
    ]
    odd = Record("k", {1, 2}, 5, "<timer>", "id")  # not JSON: its repr
    assert dead_letter_record(DLQ, TopicLimits(), ERROR, "x", None, odd)[2] == b"{1, 2}"


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def pipeline() -> Pipeline:
    return (
        Pipeline("p")
        .source("in")
        .computation(
            "c", Nothing, inputs={"in": None}, outputs={"out": "wordcount.WordCount", "raw": None}
        )
    )


def output(monkeypatch, policy: str = "dead_letter", limits=None) -> KafkaOutput:
    spec = pipeline()["c"]
    collector = fake_collector(monkeypatch, limits)
    return KafkaOutput(pipeline(), spec, collector, ErrorPolicy(spec.group, policy))


@pytest.mark.parametrize("policy", ["dead_letter", "skip"])
def test_the_error_policy_decides_whether_a_bad_record_is_written_and_counts_it(
    monkeypatch, policy
):
    out = output(monkeypatch, policy)
    out.dead_letter(None, BadRecord("decode", "garbage", ERROR), "decode", source())
    out.dead_letter(Record("k", {"a": 1}, 3, "in", "id"), ERROR, "process_record", source())
    produced = out.collector.producer.produced
    assert out.policy.bad_records == 2
    if policy == "skip":
        assert produced == []
        return
    assert [(topic, key, value) for topic, key, value, *_ in produced] == [
        (DLQ, b"k", b'{"v": 1}'),
        (DLQ, b"k", b'{"v": 1}'),
    ]
    stages = [as_dict(headers)["logwheel.error.stage"] for *_, headers in produced]
    assert stages == [b"decode", b"process_record"]


def test_under_on_error_stop_a_bad_record_ends_the_process_and_writes_nothing(monkeypatch):
    out = output(monkeypatch, "stop")
    with pytest.raises(Fatal, match="on_error='stop'"):
        out.dead_letter(None, ERROR, "decode", source())
    assert out.collector.producer.produced == []


def test_a_production_is_encoded_checked_and_carries_its_id(monkeypatch):
    out = output(monkeypatch, limits=TopicLimits({"raw": Limit(max_bytes=RECORD_OVERHEAD + 10)}))
    encoded = out.encode("raw", "k", {"a": 1}, 5, "rid")
    assert encoded == ("raw", b"k", b'{"a":1}', -1, 5, [("logwheel.id", b"rid")])
    out.produce_all([encoded])
    assert out.collector.producer.produced == [("raw", b"k", b'{"a":1}', 0, 5, encoded[5])]
    with pytest.raises(BadRecord) as refused:
        out.encode("raw", "k", {"a": "much too long"}, 5, "rid")
    assert refused.value.stage == "produce"
    with pytest.raises(BadRecord) as unencodable:
        out.encode("out", "k", {"not": "a WordCount"}, 5, "rid")
    assert unencodable.value.stage == "encode"


def test_every_task_of_a_process_shares_one_output(monkeypatch):
    spec = pipeline()["c"]
    io = PartIO(
        pipeline(), spec, fake_collector(monkeypatch), {"in": 1}, ErrorPolicy(spec.group, "skip")
    )
    assert io.output.collector is io.collector and io.output.policy is io.policy
    assert io.output.dlq == spec.dlq
