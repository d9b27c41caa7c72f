"""Stand-ins for a membership's Kafka clients, for unit tests of the pieces that drive them
(committer, task manager): each call they get is written to `log`, as a test reads it back.
Behaviour that lives in Kafka is tested against the real broker in tests/integration."""

from __future__ import annotations

import json
from concurrent.futures import Future
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from framework.kafka.collector import Collector
from framework.kafka.limits import TopicLimits


class FakeProducer:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.fail_commit: KafkaError | None = None

    def init_transactions(self, timeout):
        self.log.append("init")

    def begin_transaction(self):
        self.log.append("begin")

    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        self.log.append(f"offsets {[(o.topic, o.partition, o.offset) for o in offsets]}")
        self.metadata = json.loads(offsets[0].metadata)

    def commit_transaction(self, timeout):
        if self.fail_commit is not None:
            raise KafkaException(self.fail_commit)
        self.log.append("commit")

    def abort_transaction(self, timeout):
        self.log.append("abort")

    def flush(self, timeout=None):
        return 0

    def poll(self, timeout=None):
        return 0


class FakeCollector:
    def __init__(self, log: list[str] | None = None) -> None:
        self.log = [] if log is None else log
        self.producer = FakeProducer(self.log)
        self.limits = TopicLimits()
        self.written: dict = {}

    def flush(self):
        self.log.append("flush")

    def poll(self, timeout=0):
        self.producer.poll(timeout)

    def send(self, topic, key, value, **kwargs):
        self.log.append(f"send {topic}")

    def discard_errors(self):
        self.log.append("discard")

    def refusal(self):
        return None

    def remember(self, offsets):
        pass

    claim_ends = Collector.claim_ends  # the real one: through `remember`, with the admin given


class FakeConsumer:
    """A group member's consumer: committed offsets as given, assignment and pauses kept."""

    def __init__(self, committed: dict[tuple[str, int], int] | None = None) -> None:
        self._committed = committed or {}
        self.calls: list[tuple] = []
        self.paused: set[tuple[str, int]] = set()

    def consumer_group_metadata(self):
        return object()

    def committed(self, tps, timeout):
        offsets = self._committed
        return [
            TopicPartition(tp.topic, tp.partition, offsets.get((tp.topic, tp.partition), -1001))
            for tp in tps
        ]

    def get_watermark_offsets(self, tp, timeout):
        return (0, 0)

    def assign(self, tps):
        self.calls.append(("assign", [(t.topic, t.partition, t.offset) for t in tps]))

    def pause(self, tps):
        self.paused |= {(t.topic, t.partition) for t in tps}

    def resume(self, tps):
        self.paused -= {(t.topic, t.partition) for t in tps}

    def seek(self, tp):
        self.calls.append(("seek", (tp.topic, tp.partition, tp.offset)))


class FakeAdmin:
    """An admin client whose partitions all end at offset 0."""

    def list_offsets(self, request, **kwargs):
        answers = {}
        for tp in request:
            answers[tp] = future = Future()
            future.set_result(SimpleNamespace(offset=0))
        return answers
