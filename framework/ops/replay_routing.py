"""Where a dead letter goes back: the record `logwheel dlq replay` writes to the computation's
replay topic for it, routed by the stream it was read from.

The dead letter's `logwheel.source.topic` names that stream: an input the computation reads
by its Kafka key, the `.by-key` topic of an input it re-keys, or its own replay topic (a
replayed record that failed again, whose `logwheel.replay.stream` names the stream). A re-keyed
input's key extractor is applied again, as the current code has it, to the decoded value — a
record the fix made routable goes to the partition where its key now belongs, and the keyed
task there keys it the same way; one read by its Kafka key keeps its key and partition. Keyed
task p reads partition p of the replay topic (framework/kafka/replays.py).
A dead letter of a timer's firing (read from nowhere), of another topic, or whose value was
cut to fit the dead-letter topic cannot go back: it is left as it is, with the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from framework.core.clock import now_ms
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.kafka.collector import ID_HEADER, Outgoing
from framework.kafka.output import foreign
from framework.kafka.partitioning import key_partition
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.rekeying import routed_key
from framework.kafka.replays import REPLAY_OF, REPLAY_STREAM, header, letter_id
from framework.kafka.stream_codecs import stream_decoder
from framework.ops.dead_letter_log import DeadLetter


@dataclass(frozen=True)
class Routed:
    """A dead letter's way back: the stream it is a record of, its original key (the keyed task
    applies a re-keyed input's extractor itself), the partition of the replay topic (= of the
    key space) its routed key belongs to, and its record id."""

    stream: str
    key: bytes | None
    partition: int
    record_id: str


class Router:
    """Routes the dead letters of one computation (`route`), decoding values where a key
    extractor needs them with the computation's stream decoders."""

    def __init__(
        self, pipeline: Pipeline, spec: ComputationSpec, registry: RegistrySettings | None = None
    ) -> None:
        self.pipeline, self.spec, self.registry = pipeline, spec, registry
        self.inputs = {i.stream: i for i in spec.inputs}
        self.by_key = {spec.by_key(i.stream): i.stream for i in spec.inputs if i.key is not None}
        self._decoders: dict[str, Any] = {}

    def stream_of(self, letter: DeadLetter) -> str | None:
        """The input stream the dead letter is a record of (None: of no input)."""
        source = letter.source_topic
        if source == self.spec.replay:
            stream = header(letter.headers, REPLAY_STREAM)
        else:
            stream = self.by_key.get(source, source)
        return stream if stream in self.inputs else None

    def route(self, letter: DeadLetter) -> Routed | str:
        """Its way back, or why it has none (a sentence). `BadRecord` at stage "decode" or
        "key" when the current code still cannot route it: it is then dead-lettered again."""
        stream = self.stream_of(letter)
        if stream is None:
            where = letter.source_topic or "no topic (a timer's firing)"
            return f"read from {where}, which is no input of {self.spec.name}"
        if letter.truncated:
            return "its value was cut to fit the dead-letter topic"
        at, offset = letter.source_partition, letter.source_offset
        if at is None or offset is None:
            return "it does not say where it was read"
        n, inp = self.spec.partitions, self.inputs[stream]
        rid = header(letter.headers, ID_HEADER) or letter_id(letter.source_topic, at, offset)
        if inp.key is None:  # read by its Kafka key: the partition it was read from
            where = (
                at if at < n else key_partition((letter.key or b"").decode("utf-8", "replace"), n)
            )
            return Routed(stream, letter.key, where, rid)
        decode = self._decoders.get(stream)
        if decode is None:
            decode = self._decoders[stream] = stream_decoder(self.pipeline, stream, self.registry)
        record, key = routed_key(
            inp, decode, letter.key, letter.value, letter.timestamp,
            foreign(list(letter.headers)), f"{letter.source_topic}/{at}/", offset,
        )  # fmt: skip
        return Routed(stream, letter.key, key_partition(key.decode(), n), record.id)


def replay_record(spec: ComputationSpec, letter: DeadLetter, routed: Routed) -> Outgoing:
    """The record of the replay topic for `letter`: its original value and timestamp, under its
    routed key and id, naming what it replays and its stream, with the original's own headers."""
    own = [(k, v) for k, v in foreign(list(letter.headers)) if k != ID_HEADER]
    headers = [
        (ID_HEADER, routed.record_id.encode()),
        (REPLAY_OF, letter.ident.encode()),
        (REPLAY_STREAM, routed.stream.encode()),
        *own,
    ]
    return spec.replay, routed.key, letter.value, routed.partition, letter.timestamp, headers


def replayed_record(spec: ComputationSpec, letter: DeadLetter, what: dict) -> Outgoing:
    """The `.replayed` record saying that `letter` was dealt with (`what`: where it went)."""
    value = json.dumps({**what, "at": now_ms()}).encode()
    return spec.replayed, letter.ident.encode(), value, 0, 0, None
