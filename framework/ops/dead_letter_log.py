"""Reading a dead-letter topic and the record of what `logwheel dlq replay` sent back.

A dead letter is the original key, value, headers and timestamp of a bad record with its reason
in `logwheel.error`, its stage in `logwheel.error.stage` and where it was read in
`logwheel.source.topic|partition|offset`; one of a replayed record that failed again also names,
in `logwheel.replay.of`, the dead letter it replays. What was sent back is the compacted
`<pipeline>.<computation>.replayed`, keyed by the dead letter's `<topic>/<partition>/<offset>`.
Both are read committed, to where they end now: a replay in progress (an open transaction) is
not counted until it commits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from framework.core.part import reader_group
from framework.core.pipeline import PipelineError
from framework.kafka.config import consumer_config
from framework.kafka.output import TRUNCATED_HEADER
from framework.kafka.replays import REPLAY_OF, header, letter_id
from framework.kafka.topic_ends import Ends, read_to_end

READ_TIMEOUT_S = 60


@dataclass(frozen=True)
class DeadLetter:
    """One record of a dead-letter topic, its error headers read."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]
    stage: str
    reason: str
    source_topic: str  # "" for a timer's firing, which was read from nowhere
    source_partition: int | None
    source_offset: int | None
    replays: str | None  # the dead letter it replays, if it is one of a replayed record

    @property
    def ident(self) -> str:
        """`<topic>/<partition>/<offset>`: its name in `.replayed` and in `logwheel.replay.of`."""
        return letter_id(self.topic, self.partition, self.offset)

    @property
    def truncated(self) -> bool:
        """Its value was cut to fit the dead-letter topic: it cannot be sent back."""
        return header(self.headers, TRUNCATED_HEADER) is not None

    @classmethod
    def of(cls, msg: Message) -> DeadLetter:
        headers = tuple(msg.headers() or ())
        return cls(
            msg.topic() or "",
            msg.partition() or 0,
            msg.offset() or 0,
            msg.key(),
            msg.value(),
            msg.timestamp()[1],
            headers,
            header(headers, "logwheel.error.stage") or "unknown",
            header(headers, "logwheel.error") or "",
            header(headers, "logwheel.source.topic") or "",
            _int(header(headers, "logwheel.source.partition")),
            _int(header(headers, "logwheel.source.offset")),
            header(headers, REPLAY_OF),
        )

    def describe(self) -> dict:
        """What `dlq ls` shows of it."""
        return {
            "dead_letter": self.ident,
            "timestamp": self.timestamp,
            "key": None if self.key is None else self.key.decode(errors="replace"),
            "stage": self.stage,
            "reason": self.reason,
            "source_topic": self.source_topic,
            "source_partition": self.source_partition,
            "source_offset": self.source_offset,
            "replays": self.replays,
        }


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def read_committed(
    bootstrap: str, topic: str, kafka: dict | None = None, timeout: float = READ_TIMEOUT_S
) -> list[Message] | None:
    """Every committed record of `topic` up to its last stable offset now, in offset order per
    partition; None if the topic does not exist."""
    consumer = Consumer(consumer_config(bootstrap, reader=reader_group(topic), extra=kafka))
    out: list[Message] = []
    try:
        meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        parts = [(topic, p) for p in sorted(meta.partitions)]
        ends = Ends(consumer)
        ends.add(parts)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for _, p in parts])

        def apply(msgs: list[Message]) -> None:
            out.extend(m for m in msgs if m.offset() < ends.ends[(topic, m.partition())])

        read_to_end(ends, apply, timeout=timeout)
    finally:
        consumer.close()
    return out


def read_dead_letters(
    bootstrap: str, topic: str, kafka: dict | None = None, *, must_exist: bool = True
) -> list[DeadLetter]:
    """The dead letters of `topic`, oldest first; a configuration error naming the fix if the
    topic does not exist (with `must_exist`, else none)."""
    msgs = read_committed(bootstrap, topic, kafka)
    if msgs is None:
        if not must_exist:
            return []
        raise PipelineError(
            f"no dead-letter topic {topic}: name a computation or a sink of the pipeline "
            "(its topics made by `logwheel topics`)"
        )
    return [DeadLetter.of(m) for m in msgs]


def read_replayed(bootstrap: str, topic: str, kafka: dict | None = None) -> dict[str, dict]:
    """What `.replayed` topic `topic` records as sent back: dead letter -> what became of it
    (empty if the topic does not exist: nothing was)."""
    done: dict[str, dict] = {}
    for msg in read_committed(bootstrap, topic, kafka) or ():
        if msg.key() is None:
            continue
        ident = msg.key().decode(errors="replace")
        if msg.value() is None:
            done.pop(ident, None)
            continue
        try:
            done[ident] = json.loads(msg.value())
        except ValueError:
            done[ident] = {}
    return done
