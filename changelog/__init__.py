"""Reading another team's changelog as a table (Samza/Kafka Streams style).

A changelog topic `<pipeline>.<computation>.changelog` is compacted: its latest record per key
is that key's whole state, a tombstone its deletion. `ChangelogTable` reads it (read_committed:
only what the owning job committed) into memory, or into RocksDB under `path` for tables that
outgrow memory (a reopened table resumes where it stopped and reads only the tail), and
follows it live.

Values decode as they describe themselves: Avro single-object encoding by its fingerprint,
else JSON; with a Schema Registry (`registry=URL`, else `LOGWHEEL_SCHEMA_REGISTRY`) also the
Confluent wire format, by the writer schema its id names, so another team's Confluent topic
reads as dicts too. A value that is none of these raises `DecodeError` with its reason. A
registry away raises `RegistryUnavailable` (a `Retry`) and loses nothing: the records it
interrupted are read again by the next `catch_up` or `follow`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from rich.progress import Progress

from changelog.store import MemoryRows, RocksRows
from framework.errors import ConfigurationError, Retry
from framework.kafka.config import consumer_config
from framework.kafka.errors import reaching_kafka
from framework.kafka.registry_settings import at_url
from framework.kafka.stream_codecs import any_decoder
from framework.kafka.topic_ends import Ends, read_to_end, records

__all__ = ["ChangelogTable"]


def key_text(raw: bytes | None) -> str:
    """A record key as text: UTF-8 (the contract's keys), else its bytes escaped (`\\xff`), so
    a key some other writer put there is shown, not a crash of `changelog dump`."""
    if raw is None:
        return ""
    return raw.decode("utf-8", errors="backslashreplace")


class ChangelogTable:
    """The latest value per key of a changelog topic."""

    def __init__(
        self,
        topic: str,
        *,
        bootstrap: str,
        kafka: dict | None = None,
        path: str | Path | None = None,
        registry: str | None = None,
    ) -> None:
        """`registry`: the Schema Registry of wire-format values (else
        `LOGWHEEL_SCHEMA_REGISTRY`; without one, only logwheel's own encodings and JSON);
        one that does not answer is a `RegistryConfigurationError` naming its URL. A topic that
        does not exist is a `ConfigurationError` (a `ValueError`) naming it; a cluster that does
        not answer, an `Unreachable` (a `Retry`)."""
        self.topic = topic
        decode = any_decoder(at_url(registry), topic)
        self._rows = MemoryRows(decode) if path is None else RocksRows(Path(path), decode)
        self._consumer = Consumer(consumer_config(bootstrap, extra=kafka))
        try:
            with reaching_kafka():
                meta = self._consumer.list_topics(topic, timeout=30).topics[topic]
        except Exception:
            self.close()
            raise
        if meta.error is not None:
            self.close()
            raise ConfigurationError(
                f"no changelog topic {topic!r} at {bootstrap} ({meta.error.str()}): check its "
                "name (<pipeline>.<computation>.changelog) and --bootstrap"
            )
        self._partitions = sorted(meta.partitions)
        start = self._rows.positions
        self._consumer.assign(
            [TopicPartition(topic, p, start.get(p, OFFSET_BEGINNING)) for p in self._partitions]
        )
        self.read = 0  # records read since this table was opened

    def catch_up(self, *, progress: bool | None = None) -> ChangelogTable:
        """Read every partition to its current end; a progress bar on a terminal (or when
        `progress` is True)."""
        if progress is None:
            progress = sys.stderr.isatty()
        ends = Ends(self._consumer)
        positions = {(self.topic, p): o for p, o in self._rows.positions.items()}
        ends.add([(self.topic, p) for p in self._partitions], positions)
        read = self.read
        with Progress(disable=not progress, transient=True) as bar:
            task = bar.add_task(f"reading {self.topic}", total=ends.backlog or 1)

            def apply(msgs: list) -> None:
                self._apply(msgs)
                bar.update(task, completed=self.read - read)

            read_to_end(ends, apply)
        return self

    def _apply(self, msgs: list) -> list[tuple[str, Any, Any]]:
        changes, positions, firsts = [], {}, {}
        for msg in msgs:
            key = key_text(msg.key())
            changes.append((key, msg.value()))
            positions[msg.partition()] = msg.offset() + 1
            firsts.setdefault(msg.partition(), msg.offset())
        try:
            applied = self._rows.apply(changes, positions) if changes else []
        except Retry:  # the registry is away: these records are read again next time
            for partition, offset in firsts.items():
                self._consumer.seek(TopicPartition(self.topic, partition, offset))
            raise
        self.read += len(changes)
        return applied

    def get(self, key: str, default: Any = None) -> Any:
        value = self._rows.get(key)
        return default if value is None else value

    def __contains__(self, key: str) -> bool:
        return self._rows.get(key) is not None

    def items(self) -> list[tuple[str, Any]]:
        return list(self._rows.items())

    def __len__(self) -> int:
        return len(self._rows)

    def follow(self, *, idle_timeout: float | None = None) -> Iterator[tuple[str, Any, Any]]:
        """Live (key, old, new) changes after what has been read; `new` None is a deletion.
        Ends after `idle_timeout` seconds without a change, if given."""
        last = time.monotonic()
        while idle_timeout is None or time.monotonic() - last < idle_timeout:
            changes = self._apply(records(self._consumer.consume(1000, 0.5)))
            if changes:
                last = time.monotonic()
                yield from changes

    def close(self) -> None:
        self._consumer.close()
        self._rows.close()

    def __enter__(self) -> ChangelogTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
