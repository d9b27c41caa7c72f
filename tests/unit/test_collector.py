"""The collector's flush: what the commit sees when confluent-kafka fails inside it."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.collector import Collector


class _FencedProducer:
    """confluent-kafka's flush of a fenced transactional producer: the fatal KafkaException,
    then a delivery callback run with it pending, which Python turns into a SystemError."""

    def flush(self, *args):
        fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
        try:
            raise fenced
        except KafkaException as error:
            raise SystemError(
                "Collector._delivered returned a result with an exception set"
            ) from error


def test_a_fatal_error_inside_flush_reaches_the_commit_as_the_kafka_error():
    collector = Collector({"bootstrap.servers": "127.0.0.1:1"})
    collector.producer = _FencedProducer()
    with pytest.raises(KafkaException) as raised:
        collector.flush()
    assert raised.value.args[0].code() == KafkaError._FENCED and raised.value.args[0].fatal()
