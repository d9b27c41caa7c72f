"""What a Kafka record from outside may carry into logwheel: its `logwheel.id` header is its
id; every other header in logwheel's namespace is dropped (counted) before anything reads it,
and a dead letter's own headers come first and are the only ones of their names."""

from __future__ import annotations

import json

from prometheus_client import REGISTRY

from framework.kafka.collector import foreign
from framework.kafka.record_decoding import decode_record

FORGED = [
    ("logwheel.id", b"order-7"),
    ("logwheel.error", b"nothing wrong here"),
    ("logwheel.error.stage", b"late"),
    ("logwheel.source.topic", b"elsewhere"),
    ("trace", b"abc"),
]


def test_a_source_records_id_header_is_kept_and_its_other_logwheel_headers_dropped_counted():
    def dropped() -> float:
        return REGISTRY.get_sample_value("logwheel_dropped_headers_total", {"stream": "s"}) or 0

    before = dropped()
    record = decode_record(json.loads, "s", b"k", b"{}", 5, FORGED, "s/0/", 3)
    assert record.id == "order-7"
    assert dropped() - before == 3


def test_a_dead_letter_keeps_the_records_own_headers_but_none_of_logwheels_but_its_id():
    assert foreign(FORGED) == [("logwheel.id", b"order-7"), ("trace", b"abc")]
    assert foreign(None) == []
