"""What a task's hooks write, on Kafka: the `Output` the executor produces through (encoded
and checked against the stream's schema and the broker's limits before the hook call counts as
done) and the dead letters of one computation under its error policy. The streaming tasks and
the backfill's Spark tasks share both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message

from framework.core.api import Record
from framework.core.dead_letters import ErrorPolicy
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.errors import BadRecord
from framework.kafka.collector import ID_HEADER, Collector, Outgoing
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import stream_encoder
from framework.serde.codecs import encode_json


@dataclass
class Runtime:
    """What every task of one process shares."""

    pipeline: Pipeline
    spec: ComputationSpec
    collector: Collector
    partitions: dict[str, int]  # topic -> partition count, from the broker
    policy: ErrorPolicy
    registry: RegistrySettings | None = None  # the [registry] table of --config, if any

    def dead_letter(
        self,
        msg: Message | None,
        error: BaseException,
        stage: str,
        fallback: tuple[bytes | None, bytes | None, int] = (None, None, 0),
    ) -> None:
        """A bad record: counted, and written to the dead-letter topic if the policy says so."""
        if self.policy.admit(stage, error):
            self.collector.dead_letter(self.spec.dlq, msg, error, stage, fallback)


class TaskOutput:
    """The executor's `Output` on Kafka: encodes and checks a hook call's productions against
    the stream's schema and the broker's limits before the call counts as done."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.collector = runtime.collector
        self.encoders = {
            s: stream_encoder(runtime.pipeline, s, runtime.registry) for s in runtime.spec.outputs
        }
        self.source: Message | None = None  # the input record being processed, if any

    def encode(self, stream: str, key: str, value: Any, timestamp: int, record_id: str) -> Outgoing:
        try:
            payload = self.encoders[stream](value)
            raw_key = key.encode()
        except Exception as error:
            raise BadRecord("encode", f"output to {stream!r}: {error}", error) from error
        self.collector.limits.check(stream, raw_key, payload, timestamp)
        return stream, raw_key, payload, -1, timestamp, [(ID_HEADER, record_id.encode())]

    def produce_all(self, encoded: list[Outgoing]) -> None:
        self.collector.send_all(encoded)

    def dead_letter(self, record: Record, error: BaseException, stage: str) -> None:
        try:
            fallback_value = encode_json(record.value)
        except Exception:
            fallback_value = repr(record.value).encode()
        fallback = (record.key.encode(errors="replace"), fallback_value, record.timestamp)
        self.rt.dead_letter(self.source, error, stage, fallback)
