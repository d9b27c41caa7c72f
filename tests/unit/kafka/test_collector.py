"""The collector: where each record it sent landed (what marks and checkpoints carry), and what
the broker refused, kept for the commit it belongs to. Over a fake producer; the broker's side
is tests/integration."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.errors import Retry
from framework.kafka.collector import _delivery_timeout_s
from tests.unit.kafka.fakes import fake_collector


def test_each_partition_is_written_up_to_the_last_offset_delivered_there(monkeypatch):
    collector = fake_collector(monkeypatch)
    for partition in (0, 0, 1, 0):
        collector.send("out", b"k", b"v", partition=partition)
    collector.send_all((("other", None, b"v", -1, 0, None),))
    assert collector.written == {}  # nothing delivered yet
    collector.flush()
    assert collector.written == {("out", 0): 2, ("out", 1): 0, ("other", 0): 0}
    assert collector.delivered == {"out": 4, "other": 1}


def test_a_send_goes_by_position_with_the_partitioners_and_the_brokers_defaults(monkeypatch):
    collector = fake_collector(monkeypatch)
    collector.send("out", b"k", b"v")
    collector.send("out", b"k", b"v", timestamp=5, headers=[("h", b"1")], partition=2)
    assert collector.producer.produced == [
        ("out", b"k", b"v", 0, 0, None),  # partition -1 (the fake's 0) and the broker's time
        ("out", b"k", b"v", 2, 5, [("h", b"1")]),
    ]


def test_offsets_taken_over_from_a_previous_owner_are_never_lowered(monkeypatch):
    collector = fake_collector(monkeypatch)
    collector.remember([(("out", 0), 10), (("out", 1), 3)])
    collector.remember([(("out", 0), 4)])
    collector.send("out", b"k", b"v", partition=0)  # delivered at offset 0, below 10
    collector.send("out", b"k", b"v", partition=2)
    collector.flush()
    assert collector.written == {("out", 0): 10, ("out", 1): 3, ("out", 2): 0}


def test_a_record_delivered_at_no_known_offset_counts_its_partitions_end_as_written(monkeypatch):
    """A retried send the broker had already written is reported without its offset: the
    partition's end, asked of the admin client, stands for it (a mark never claims less)."""
    collector = fake_collector(monkeypatch)
    collector.producer.unplaced = True
    asked = []

    def list_offsets(wanted, request_timeout):
        asked.extend((tp.topic, tp.partition) for tp in wanted)
        answers = {}
        for tp in wanted:
            answers[tp] = future = Future()
            future.set_result(SimpleNamespace(offset=42))
        return answers

    collector._admin = lambda: SimpleNamespace(list_offsets=list_offsets)
    collector.send("out", b"k", b"v", partition=3)
    collector.flush()
    assert asked == [("out", 3)]
    assert collector.written == {("out", 3): 41}
    collector.flush()  # placed once
    assert asked == [("out", 3)]


def test_a_refusal_fails_the_next_flush_once_and_a_refusal_of_content_is_told_apart(monkeypatch):
    collector = fake_collector(monkeypatch)
    producer = collector.producer
    producer.refuse["fenced"] = KafkaError(KafkaError._FENCED)
    producer.refuse["big"] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    collector.send("fenced", b"k", b"v")
    collector.poll()
    assert collector.refusal() is None  # not the data's fault: never dead-letter for it
    collector.send("big", b"k", b"v")
    collector.poll()
    assert collector.refusal().code() == KafkaError.MSG_SIZE_TOO_LARGE
    with pytest.raises(KafkaException) as raised:
        collector.flush()
    assert raised.value.args[0].code() == KafkaError._FENCED  # the first one
    collector.flush()  # raised once
    assert collector.written == {}


def test_refusals_of_an_aborted_transaction_are_dropped(monkeypatch):
    collector = fake_collector(monkeypatch)
    collector.producer.refuse["big"] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    collector.send("big", b"k", b"v")
    collector.poll()
    collector.discard_errors()
    assert collector.refusal() is None
    collector.flush()


def test_a_full_queue_is_served_until_the_send_fits_and_a_send_refused_at_once_is_kept(
    monkeypatch,
):
    collector = fake_collector(monkeypatch)
    producer = collector.producer
    producer.full = 3
    collector.send("out", b"k", b"v")
    assert len(producer.produced) == 1

    def refuse(*args):
        raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))

    producer.produce = refuse
    collector.send("out", b"k", b"v" * 10)  # not raised here: it fails its commit
    assert collector.refusal().code() == KafkaError.MSG_SIZE_TOO_LARGE
    with pytest.raises(KafkaException):
        collector.flush()


def test_a_fatal_error_raised_out_of_a_callback_is_kept_first_instead_of_ending_the_process(
    monkeypatch,
):
    """confluent-kafka raises a fenced producer's fatal error out of poll/flush, or as the
    cause of a SystemError: the flush that follows raises it, before any other refusal."""
    collector = fake_collector(monkeypatch)
    producer = collector.producer
    producer.refuse["big"] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    collector.send("big", b"k", b"v")
    collector.poll()
    fatal = KafkaException(KafkaError(KafkaError._FENCED, fatal=True))

    def poll(timeout=0):
        raise SystemError("error return without exception set") from fatal

    producer.poll = poll
    collector.poll()
    with pytest.raises(KafkaException) as raised:
        collector.flush()
    assert raised.value.args[0].code() == KafkaError._FENCED

    def unrelated(timeout=0):
        raise SystemError("not from a callback")

    producer.poll = unrelated
    with pytest.raises(SystemError):
        collector.poll()


def test_a_flush_still_waiting_long_after_every_send_should_have_landed_is_a_retry(monkeypatch):
    collector = fake_collector(monkeypatch)
    collector._stuck_after = 0.01
    collector.producer.flush = lambda timeout=None: 1  # one record never lands nor fails
    with pytest.raises(Retry, match="1 records not delivered"):
        collector.flush()


def test_the_delivery_timeout_is_librdkafkas_lowered_to_the_transactions():
    assert _delivery_timeout_s({}) == 300
    assert _delivery_timeout_s({"message.timeout.ms": 5_000}) == 5
    assert _delivery_timeout_s({"transactional.id": "t"}) == 60
    assert _delivery_timeout_s({"transactional.id": "t", "transaction.timeout.ms": 9_000}) == 9
    assert _delivery_timeout_s({"message.timeout.ms": 0}) == 86_400
