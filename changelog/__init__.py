"""Reading another team's changelog as a table (Samza/Kafka Streams style).

A changelog topic `<pipeline>.<computation>.changelog` is compacted: its latest record per key
is that key's whole state, a tombstone its deletion. `ChangelogTable` reads it (read_committed:
only what the owning job committed) into memory and follows it live.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from rich.progress import Progress

from framework.kafka import consumer_config
from framework.serde import default_schemas

__all__ = ["ChangelogTable"]


class ChangelogTable:
    """The latest value per key of a changelog topic."""

    def __init__(self, topic: str, *, bootstrap: str, kafka: dict | None = None) -> None:
        self.topic = topic
        self._consumer = Consumer(consumer_config(bootstrap, extra=kafka))
        meta = self._consumer.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:
            raise ValueError(f"no changelog topic {topic!r}: {meta.error.str()}")
        self._partitions = sorted(meta.partitions)
        self._consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in self._partitions]
        )
        self._decode = default_schemas().decode_any
        self._table: dict[str, Any] = {}

    def catch_up(self, *, progress: bool = False) -> ChangelogTable:
        """Read every partition to its current end (with a progress bar if asked)."""
        ends = {
            p: self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), 30)[1]
            for p in self._partitions
        }
        total = sum(ends.values())
        pending = {p for p in self._partitions if ends[p] > 0}
        with Progress(disable=not progress, transient=True) as bar:
            task = bar.add_task(f"reading {self.topic}", total=total or 1)
            while pending:
                for msg in self._consumer.consume(5000, 0.1):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pending.discard(msg.partition())
                            continue
                        raise KafkaException(err)
                    self._apply(msg)
                    bar.update(task, completed=msg.offset())
        return self

    def _apply(self, msg) -> tuple[str, Any, Any]:
        key = msg.key().decode() if msg.key() is not None else ""
        new = None if msg.value() is None else self._decode(msg.value())
        old = self._table.pop(key, None) if new is None else self._table.get(key)
        if new is not None:
            self._table[key] = new
        return key, old, new

    def get(self, key: str, default: Any = None) -> Any:
        return self._table.get(key, default)

    def items(self) -> list[tuple[str, Any]]:
        return list(self._table.items())

    def __len__(self) -> int:
        return len(self._table)

    def follow(self, *, idle_timeout: float | None = None) -> Iterator[tuple[str, Any, Any]]:
        """Live (key, old, new) changes after what has been read; `new` None is a deletion.
        Ends after `idle_timeout` seconds without a change, if given."""
        last = time.monotonic()
        while idle_timeout is None or time.monotonic() - last < idle_timeout:
            for msg in self._consumer.consume(1000, 0.5):
                if msg.error() is None:
                    last = time.monotonic()
                    yield self._apply(msg)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> ChangelogTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
