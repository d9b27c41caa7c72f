"""Tables a computation joins its stream against (Samza §3.2, Kafka Streams' KStream–KTable
join): local replicas of compacted topics — another computation's changelog, or any compacted
stream keyed like the input — co-partitioned with the computation's key space.

Each keyed task owns a RocksDB replica of partition p of every declared table, resumed from
its own checkpoint (a restart reads only the tail). A task does not process its first record
before its replicas are read to their end (bootstrapping), and before each batch of records
its replicas read at least to the end offsets the broker reports then: a record is joined with
the table as of its processing, and never with a table older than what was committed before
the record was read. Tombstones delete. Replicas keep the raw values; a view decodes them as
`framework.kafka.stream_codecs.table_decoder` says: a topic declared in the Confluent wire format by
its writer schema's id, resolved to the declared schema; any other by its own fingerprint
(Avro) or as JSON (or, with a registry, its wire-format id), so any team's changelog reads
without configuration. A value that cannot be decoded is a `DecodeError` naming the table:
the record whose hook read it is dead-lettered at stage "decode", the rest flows. A registry
away is a `Retry`: the hook's effects are undone and the record read again after a rejoin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from rocksdict import Rdict

from framework.core.pipeline import ComputationSpec, Pipeline
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import table_decoder
from framework.kafka.topic_ends import Ends, read_to_end, records, watermark_offsets
from framework.serde.codecs import DecodeError, Decoder
from framework.state.rocks import open_raw, read_json, write_with_position

log = logging.getLogger(__name__)
_POSITION = b"\x00logwheel:position"
_TIMEOUT_S = 30


class TableView:
    """Read-only view of one table partition for the hooks: `get(key)` and `in`."""

    def __init__(self, name: str, topic: str, db: Rdict, decode: Decoder) -> None:
        self.name = name
        self.topic = topic
        self._db = db
        self._decode = decode

    def get(self, key: str, default: Any = None) -> Any:
        raw = self._db.get(key.encode())
        if raw is None:
            return default
        try:
            return self._decode(raw)
        except DecodeError as error:
            raise DecodeError(f"table {self.name!r} ({self.topic}), key {key!r}: {error}") from None

    def __contains__(self, key: str) -> bool:
        return self._db.get(key.encode()) is not None

    def __repr__(self) -> str:
        return f"TableView({self.name!r})"


class _Replica:
    def __init__(self, name: str, topic: str, partition: int, path: Path, decode: Decoder) -> None:
        self.topic, self.partition = topic, partition
        self.db = open_raw(path)
        self.position = read_json(self.db, _POSITION, OFFSET_BEGINNING)
        self.view = TableView(name, topic, self.db, decode)

    def apply(self, changes: list[tuple[bytes, bytes | None]], position: int) -> None:
        write_with_position(self.db, changes, _POSITION, position)
        self.position = position


class Tables:
    """The table replicas of one process's keyed tasks, read with one consumer."""

    def __init__(
        self,
        consumer: Consumer,
        pipeline: Pipeline,
        spec: ComputationSpec,
        state_dir: Path,
        registry: RegistrySettings | None = None,
    ) -> None:
        self.consumer = consumer
        self.spec = spec
        self.state_dir = state_dir
        self._decoders = {
            topic: table_decoder(pipeline, topic, registry) for topic in spec.tables.values()
        }
        self._replicas: dict[tuple[str, int], _Replica] = {}

    def add(self, partition: int) -> dict[str, TableView]:
        """Open (or resume) partition `partition` of every table, read it to its end, and
        return the views for task `partition`'s hooks."""
        replicas = []
        for name, topic in self.spec.tables.items():
            path = self.state_dir / f"task-{partition}" / "tables" / name
            replica = _Replica(name, topic, partition, path, self._decoders[topic])
            self._replicas[(topic, partition)] = replica
            low, _ = watermark_offsets(self.consumer, TopicPartition(topic, partition))
            if replica.position < low:  # new, or the log's start moved past it
                replica.apply([], low)
            replicas.append(replica)
        self.consumer.incremental_assign(
            [TopicPartition(r.topic, partition, r.position) for r in replicas]
        )
        started = time.monotonic()
        self.sync([partition])
        log.info(
            "%s task %d: tables %s read to their end in %.1fs",
            self.spec.group,
            partition,
            sorted(self.spec.tables),
            time.monotonic() - started,
        )
        return {r.view.name: r.view for r in replicas}

    def remove(self, partition: int) -> None:
        gone = [self._replicas.pop((t, partition)) for t in self.spec.tables.values()]
        if gone:
            self.consumer.incremental_unassign([TopicPartition(r.topic, partition) for r in gone])
        for replica in gone:
            replica.db.close()

    def sync(self, partitions: Iterable[int]) -> None:
        """Read the tables of `partitions` at least to the end offsets the broker reports now
        (read_committed: the last stable offset); `Unreachable` after `_TIMEOUT_S`."""
        ends = Ends(self.consumer)
        wanted = [(t, p) for p in partitions for t in self.spec.tables.values()]
        ends.add(
            [tp for tp in wanted if tp in self._replicas],
            {tp: self._replicas[tp].position for tp in wanted if tp in self._replicas},
        )
        read_to_end(ends, self._apply, timeout=_TIMEOUT_S, batch=1000)
        for tp, end in ends.ends.items():  # past transaction markers no record reports
            if self._replicas[tp].position < end:
                self._replicas[tp].apply([], end)

    def step(self, timeout: float = 0.0) -> None:
        """Apply what has arrived (following the tables between batches)."""
        self._apply(records(self.consumer.consume(1000, timeout)))

    def _apply(self, msgs: list) -> None:
        changes: dict[tuple[str, int], list[tuple[bytes, bytes | None]]] = {}
        positions: dict[tuple[str, int], int] = {}
        for msg in msgs:
            tp = (msg.topic(), msg.partition())
            if tp in self._replicas and msg.key() is not None:
                changes.setdefault(tp, []).append((msg.key(), msg.value()))
                positions[tp] = msg.offset() + 1
        for tp, position in positions.items():
            self._replicas[tp].apply(changes[tp], position)

    def close(self) -> None:
        for replica in self._replicas.values():
            replica.db.close()
        self._replicas.clear()
        self.consumer.close()
