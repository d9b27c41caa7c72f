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

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from rocksdict import Rdict

from framework.core.pipeline import ComputationSpec, Pipeline
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import table_decoder
from framework.kafka.topic_ends import watermark_offsets
from framework.serde.codecs import DecodeError, Decoder
from framework.state.following import Follower
from framework.state.rocks import open_raw, read_json, write_with_position

log = logging.getLogger(__name__)
_POSITION = b"\x00logwheel:position"


def decode_table_value(name: str, topic: str, decode: Decoder, key: str, raw: bytes) -> Any:
    """`raw`, the value of `key` in table `name`, decoded; a `DecodeError` names the table and
    the key (the record whose hook read it is dead-lettered at stage "decode")."""
    try:
        return decode(raw)
    except DecodeError as error:
        raise DecodeError(f"table {name!r} ({topic}), key {key!r}: {error}") from None


class TableView:
    """Read-only view of one table partition for the hooks: `get(key)` and `in`."""

    def __init__(self, name: str, topic: str, db: Rdict, decode: Decoder) -> None:
        self.name = name
        self.topic = topic
        self._db = db
        self._decode = decode

    def get(self, key: str, default: Any = None) -> Any:
        raw = self._db.get(key.encode())
        return default if raw is None else self.decoded(key, raw)

    def decoded(self, key: str, raw: bytes) -> Any:
        return decode_table_value(self.name, self.topic, self._decode, key, raw)

    def __contains__(self, key: str) -> bool:
        return self._db.get(key.encode()) is not None

    def __repr__(self) -> str:
        return f"TableView({self.name!r})"


class _Replica:
    """Partition `partition` of a table's topic, in the RocksDB at `path`."""

    def __init__(self, name: str, topic: str, partition: int, path: Path, decode: Decoder) -> None:
        self.topic, self.partition = topic, partition
        self.db = open_raw(path)
        self.positions = {partition: read_json(self.db, _POSITION, OFFSET_BEGINNING)}
        self.view = TableView(name, topic, self.db, decode)

    @property
    def position(self) -> int:
        return self.positions[self.partition]

    def apply(self, msgs: list[Message], positions: dict[int, int]) -> None:
        changes = [(m.key(), m.value()) for m in msgs if m.key() is not None]
        position = positions[self.partition]
        write_with_position(self.db, changes, _POSITION, position)
        self.positions[self.partition] = position


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
        self._follower = Follower(consumer)
        self._replicas = self._follower.replicas

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
                replica.apply([], {partition: low})
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
        (read_committed: the last stable offset); `Unreachable` after 30 s."""
        self._follower.sync([(t, p) for p in partitions for t in self.spec.tables.values()])

    def step(self, timeout: float = 0.0) -> None:
        """Apply what has arrived (following the tables between batches)."""
        self._follower.step(timeout)

    def close(self) -> None:
        for replica in self._replicas.values():
            replica.db.close()
        self._replicas.clear()
        self.consumer.close()
