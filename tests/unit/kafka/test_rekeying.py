"""The re-keying rule that the streaming re-keying task and the backfill share: the record for
the `.by-key` topic, or the stage at which it is a dead letter."""

from __future__ import annotations

import json

import pytest

from framework.core.declarations import Input
from framework.core.pipeline import key_by
from framework.errors import BadRecord, Retry
from framework.kafka.limits import RECORD_OVERHEAD, Limit, TopicLimits
from framework.kafka.rekeying import rekey, routed_key

BY_KEY = "p.c.in.by-key"
BY_USER = Input("in", key_by("user"))


def rekeyed(value: bytes, inp: Input = BY_USER, limits=None, headers=None, decode=json.loads):
    limits = TopicLimits() if limits is None else limits
    return rekey(inp, BY_KEY, limits, decode, b"kafka-key", value, 5, headers, "in/3/", 9)


def stage(**kwargs) -> str:
    with pytest.raises(BadRecord) as bad:
        rekeyed(**kwargs)
    return bad.value.stage


def test_a_record_goes_to_the_by_key_topic_under_its_extracted_key_as_it_was_read():
    value = b'{"user": "ann"}'
    assert rekeyed(value) == (BY_KEY, b"ann", value, -1, 5, [("logwheel.id", b"in/3/9")])
    assert rekeyed(value, headers=[("logwheel.id", b"order-1")])[5] == [("logwheel.id", b"order-1")]


def test_what_cannot_be_read_is_a_dead_letter_at_decode():
    assert stage(value=b"not json") == "decode"
    assert stage(value=b"{}", headers=[("logwheel.id", b"\xff")]) == "decode"


def test_an_extractor_that_fails_or_gives_no_str_is_a_dead_letter_at_key():
    assert stage(value=b'{"other": 1}') == "key"
    assert stage(value=b'{"user": 7}', inp=Input("in", lambda r: r.value["user"])) == "key"
    # a str Kafka cannot carry (a lone surrogate) is refused here too, not when produced
    assert stage(value=b'{"user": "\\ud800"}') == "key"
    with pytest.raises(BadRecord) as bad:
        rekeyed(b'{"other": 1}')
    assert isinstance(bad.value.cause, KeyError)


def test_a_record_the_by_key_topic_would_refuse_is_a_dead_letter_at_produce_given_its_limits():
    limits = TopicLimits({BY_KEY: Limit(max_bytes=RECORD_OVERHEAD + 20)})
    value = json.dumps({"user": "ann", "pad": "x" * 20}).encode()
    assert stage(value=value, limits=limits) == "produce"
    assert rekeyed(value)[1] == b"ann"  # within the default limits


def test_the_backfill_takes_the_same_key_without_a_by_key_topic_to_fit():
    value = json.dumps({"user": "ann", "pad": "x" * 20}).encode()
    record, key = routed_key(BY_USER, json.loads, b"kafka-key", value, 5, None, "in/3/", 9)
    assert key == b"ann" and record.id == "in/3/9" and record.value["pad"] == "x" * 20


def test_a_retry_is_not_the_records_fault():
    def away(raw):
        raise Retry("the registry does not answer")

    with pytest.raises(Retry):
        rekeyed(b"{}", decode=away)
