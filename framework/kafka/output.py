"""What a computation writes on Kafka besides its journals, and the one dead-letter path of
every runtime (streaming tasks and the backfill's Spark tasks alike).

`KafkaOutput` is the executor's `Output`: a production is encoded and checked against its
stream's schema and the broker's limits before the hook call counts as done. Every bad record
— undecodable, refused by its key extractor, failing in its hook, forged, from the future —
ends at its `dead_letter`: the computation's error policy decides, `dead_letter_record`
composes what goes to the part's dead-letter topic `<pipeline>.<part>.dlq`, the collector sends
it (in the open transaction, under exactly-once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from framework.core.api import Record
from framework.core.dead_letters import ErrorPolicy, reason_of
from framework.core.part import Part, own_topic
from framework.core.pipeline import Pipeline
from framework.errors import BadRecord
from framework.kafka.collector import ID_HEADER, RESERVED_PREFIX, Collector, Outgoing
from framework.kafka.limits import TopicLimits
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.replays import REPLAY_HEADERS
from framework.kafka.stream_codecs import stream_encoder
from framework.serde.json_codec import encode_json

ERROR_HEADERS = (
    "logwheel.error",
    "logwheel.error.stage",
    "logwheel.source.topic",
    "logwheel.source.partition",
    "logwheel.source.offset",
)
TRUNCATED_HEADER = "logwheel.error.truncated"


class Source(Protocol):
    """The Kafka record a bad record was read from, as confluent-kafka's `Message` gives it."""

    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def headers(self) -> list[tuple[str, bytes | None]] | None: ...


def foreign(
    headers: list[tuple[str, bytes | None]] | None, trusted: frozenset[str] = frozenset()
) -> list[tuple[str, bytes | None]]:
    """A record's headers without those in logwheel's namespace but its id (and the `trusted`
    ones, read where only logwheel writes them): what a dead letter keeps of them, after its
    own, so none of its own can be shadowed or forged."""
    return [
        (name, value)
        for name, value in headers or ()
        if name == ID_HEADER or name in trusted or not name.startswith(RESERVED_PREFIX)
    ]


def dead_letter_record(
    dlq: str,
    limits: TopicLimits,
    error: BaseException,
    stage: str,
    source: Source | None,
    record: Record | None,
    replay: str | None = None,
) -> Outgoing:
    """The dead letter of a bad record: the original key, value and headers of its `source`
    (or, for a timer's firing, which has none, the `record`'s key, its value as JSON and its
    time), after the error headers; one read from `replay`, the computation's replay topic,
    keeps what it replays (framework/kafka/replays.py). A value too large for the dead-letter
    topic is cut to fit, its size in `logwheel.error.truncated`; a timestamp the topic would
    refuse becomes the broker's time: a dead letter is kept whatever it carries."""
    if source is not None:
        key, value, timestamp = source.key(), source.value(), source.timestamp()[1]
        where = (source.topic() or "", str(source.partition()), str(source.offset()))
        replayed = replay is not None and source.topic() == replay
        kept = foreign(source.headers(), REPLAY_HEADERS if replayed else frozenset())
    else:
        assert record is not None, "a dead letter needs its source or its record"
        key, value, timestamp = record.key.encode(errors="replace"), _json(record), record.timestamp
        where, kept = ("", "", ""), []
    told = (reason_of(error), stage, *where)
    headers = [*((n, v.encode()) for n, v in zip(ERROR_HEADERS, told, strict=True)), *kept]
    if value is not None and len(value) > limits.room(dlq, key, headers):
        headers.append((TRUNCATED_HEADER, str(len(value)).encode()))
        value = value[: max(0, limits.room(dlq, key, headers))]
    if not limits.timestamp_ok(dlq, timestamp):
        timestamp = 0
    return dlq, key, value, -1, timestamp, headers


def _json(record: Record) -> bytes:
    try:
        return encode_json(record.value)
    except Exception:
        return repr(record.value).encode()


class KafkaOutput:
    """The executor's `Output` on Kafka, one per process: encodes and checks a hook call's
    productions before the call counts as done, and is where every bad record ends."""

    def __init__(
        self,
        pipeline: Pipeline,
        spec: Part,
        collector: Collector,
        policy: ErrorPolicy,
        registry: RegistrySettings | None = None,
    ) -> None:
        self.collector = collector
        self.policy = policy
        self.dlq = spec.dlq
        self.replay = own_topic(spec, "replay")  # its replayed dead letters, if it re-runs any
        self.encoders = {s: stream_encoder(pipeline, s, registry) for s in spec.outputs}

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

    def dead_letter(
        self,
        record: Record | None,
        error: BaseException,
        stage: str,
        source: Source | None = None,
    ) -> None:
        """A bad record, read from `source` (None for a timer's firing; `record` None when it
        could not be decoded): counted, and written to the dead-letter topic if the policy
        says so."""
        if self.policy.admit(stage, error):
            collector = self.collector
            letter = dead_letter_record(
                self.dlq, collector.limits, error, stage, source, record, self.replay
            )
            collector.send_all((letter,))


@dataclass
class PartIO:
    """A part (a computation, a sink) as one process runs it on Kafka, what all its tasks share:
    its declaration (`pipeline`, `spec`), the process's collector, the partition count of each
    of its topics (from the broker), the `[registry]` table of --config (if any) and the
    `output` its productions and dead letters go through, under its error `policy`."""

    pipeline: Pipeline
    spec: Any  # a Part: a keyed task's is a ComputationSpec
    collector: Collector
    partitions: dict[str, int]
    policy: ErrorPolicy
    registry: RegistrySettings | None = None
    output: KafkaOutput = field(init=False)

    def __post_init__(self) -> None:
        self.output = KafkaOutput(
            self.pipeline, self.spec, self.collector, self.policy, self.registry
        )
