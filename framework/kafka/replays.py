"""A dead letter sent back by `logwheel dlq replay` (framework/ops/replay.py) through
`<pipeline>.<computation>.replay`, which keyed task p reads beside its inputs: its headers, how
a keyed task reads it, and its (absent) part in the task's watermark.

A record of the replay topic is the dead letter's original key, value, timestamp and id, in the
partition of the key the computation routes it by, with two headers only logwheel writes:
which dead letter it replays and which of the computation's input streams it is a record of.
A replayed record that fails again keeps both in its new dead letter, so that it names what it
replays and can be replayed again, through its stream, after the next fix.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Message

from framework.core.api import Record, make_record
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.core.watermarks import PartitionWatermark
from framework.errors import BadRecord
from framework.kafka.partitioning import key_partition
from framework.kafka.record_decoding import decode_record
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.rekeying import routed_key
from framework.kafka.stream_codecs import stream_decoder

REPLAY_OF = "logwheel.replay.of"
"""`<dlq topic>/<partition>/<offset>`: the dead letter this record replays."""
REPLAY_STREAM = "logwheel.replay.stream"
"""The input stream the replayed record is a record of (its decoder and its `Record.stream`)."""
REPLAY_HEADERS = frozenset((REPLAY_OF, REPLAY_STREAM))


def letter_id(topic: str, partition: int, offset: int) -> str:
    """How a dead letter is named in `REPLAY_OF` and as the key of the `.replayed` record."""
    return f"{topic}/{partition}/{offset}"


def header(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> str | None:
    """The last value of header `name` as text (None: absent, empty or not UTF-8)."""
    found = None
    for key, value in headers or ():
        if key == name and value:
            try:
                found = bytes(value).decode()
            except UnicodeDecodeError:
                found = None
    return found


class ReplayWatermark(PartitionWatermark):
    """The replay topic's part in a keyed task's input watermark: none. It is always idle, so
    it holds nothing back, and what is read from it moves nothing: a replayed record's time is
    that of its original, often far behind the watermark."""

    def value(self) -> tuple[int | None, bool]:
        return None, True


class ReplayedRecords:
    """The `Record` keyed task `partition` hands its hook for a record of its replay topic:
    decoded as a record of the stream it names, with its original timestamp and id, keyed as
    the computation keys that stream — a re-keyed input's extractor runs again, here, on the
    original key and value. `BadRecord` at stage "decode" or "key" as for any record, or at
    "replay" when it names no input stream or its key belongs to another partition (the
    replaying command routed it with other code than the computation runs)."""

    def __init__(
        self,
        pipeline: Pipeline,
        spec: ComputationSpec,
        registry: RegistrySettings | None,
        partition: int,
    ) -> None:
        self._name, self._partitions, self._partition = spec.name, spec.partitions, partition
        self._inputs = {i.stream: i for i in spec.inputs}
        self._decoders = {
            i.stream: stream_decoder(pipeline, i.stream, registry) for i in spec.inputs
        }

    def record(self, msg: Message) -> Record:
        headers = msg.headers() or []
        stream = header(headers, REPLAY_STREAM)
        decode = self._decoders.get(stream or "")
        if stream is None or decode is None:
            raise BadRecord(
                "replay", f"a replayed record of {stream!r}, which {self._name} does not read"
            )
        own = [(name, value) for name, value in headers if name not in REPLAY_HEADERS]
        where, inp = f"{msg.topic()}/{msg.partition()}/", self._inputs[stream]
        key, value, timestamp, offset = msg.key(), msg.value(), msg.timestamp()[1], msg.offset()
        if inp.key is None:
            return decode_record(decode, stream, key, value, timestamp, own, where, offset)
        record, routed = routed_key(inp, decode, key, value, timestamp, own, where, offset)
        text = routed.decode()
        belongs = key_partition(text, self._partitions)
        if belongs != self._partition:
            raise BadRecord(
                "replay",
                f"sent to partition {self._partition}, but {self._name}'s key extractor gives "
                f"key {text!r}, of partition {belongs}: replay it with the code the computation "
                "runs",
            )
        return make_record(text, record.value, record.timestamp, record.stream, record.id)
