"""confluent-kafka's `Producer` as the collector drives it, for unit tests of the logic that
only calls it (the collector, the output, the tasks): what lands in Kafka, and how the broker
treats it, is tested against a real broker in tests/integration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Message

from framework.kafka import collector as collector_module
from framework.kafka.collector import Collector
from framework.kafka.limits import TopicLimits


class FakeProducer:
    """Queues what is produced; `poll` and `flush` deliver it, each topic-partition's offsets
    counting from 0 (partition -1, the partitioner's choice, is 0 here), to the send's own
    `on_delivery`, else the config's. `refuse[topic]`: the error each delivery to `topic`
    fails with; `full`: how many sends meet a full queue."""

    def __init__(self, config: dict) -> None:
        self.on_delivery = config.get("on_delivery")
        self.produced: list[tuple] = []  # (topic, key, value, partition, timestamp, headers)
        self.queued: list[tuple[Message | _Unplaced, Callable | None]] = []  # with its callback
        self.ends: Counter[tuple[str, int]] = Counter()
        self.refuse: dict[str, KafkaError] = {}
        self.full = 0
        self.unplaced = False  # deliveries report no offset (a retried duplicate's)

    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None,
                callback=None, timestamp=0, headers=None):  # fmt: skip
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")
        partition = max(partition, 0)
        self.produced.append((topic, key, value, partition, timestamp, headers))
        offset = self.ends[(topic, partition)]
        self.ends[(topic, partition)] += 1
        msg = Message(topic=topic, partition=partition, offset=offset, key=key, value=value)
        report = on_delivery or callback or self.on_delivery
        self.queued.append((_Unplaced(msg) if self.unplaced else msg, report))

    def poll(self, timeout: float = 0) -> int:
        queued, self.queued = self.queued, []
        for msg, report in queued:
            if report is not None:  # a producer without a callback is told nothing
                report(self.refuse.get(msg.topic()), msg)
        return 0

    def flush(self, timeout: float | None = None) -> int:
        self.poll()
        return 0


class _Unplaced:
    """A delivery report without an offset (confluent-kafka's `Message` cannot be made so)."""

    def __init__(self, msg: Message) -> None:
        self.topic, self.partition = msg.topic, msg.partition

    def offset(self) -> None:
        return None


def fake_collector(
    monkeypatch: pytest.MonkeyPatch, limits: TopicLimits | None = None, config: dict | None = None
) -> Collector:
    """A `Collector` over a `FakeProducer` (`collector.producer`)."""
    monkeypatch.setattr(collector_module, "Producer", FakeProducer)
    return Collector(config or {"bootstrap.servers": "127.0.0.1:1"}, limits)
