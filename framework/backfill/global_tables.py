"""A backfill task's global tables: each read whole from its topic (every partition, to the
end offsets the broker reports when the task starts) into the in-memory table of
framework/core/global_tables.py, under the same rules as `logwheel run`'s replica. With
`history_ms`, a hook's `get(key, as_of=record.timestamp)` then answers what the table held
when the record was new — what the live job answered — as long as the record's time is within
history_ms of the table's newest record (before it: `TableHistoryExpired`, the record
dead-lettered at stage "table"). Without it, `get(key)` is the latest value, as of the
backfill: a table without history cannot say what it held before."""

from __future__ import annotations

import functools
import logging

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from framework.core.global_tables import MemoryGlobalTable
from framework.core.part import reader_group
from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.kafka.config import consumer_config
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import table_decoder
from framework.state.following import Follower
from framework.state.tables import decode_table_value

log = logging.getLogger(__name__)


class _Loading:
    """A `MemoryGlobalTable` as a replica the follower feeds (framework/state/following.py)."""

    def __init__(self, table: MemoryGlobalTable, topic: str, wall: int) -> None:
        self.table, self.topic, self.wall = table, topic, wall
        self.positions: dict[int, int] = {}

    def apply(self, msgs: list[Message], positions: dict[int, int]) -> None:
        skipped = 0
        for msg in msgs:
            key = msg.key()
            if key is None:  # cannot be looked up: as `run` does, said and not applied
                skipped += 1
                continue
            key_, ts = key.decode(errors="replace"), msg.timestamp()[1]
            self.table.put(key_, msg.value(), ts, self.wall)
        if skipped:
            log.warning(
                "global table %r (%s): %d records without a key not applied (a table is "
                "looked up by key)",
                self.table.name,
                self.topic,
                skipped,
            )
        self.positions.update(positions)


def read_global_tables(
    pipeline: Pipeline,
    spec: ComputationSpec,
    bootstrap: str,
    kafka: dict,
    registry: RegistrySettings | None,
    wall: int,
) -> dict[str, MemoryGlobalTable]:
    """Every global table of `spec`, read to its end (read_committed), by name; `wall`: the
    plan's wall time, which records stamped ahead of it are judged by."""
    if not spec.global_tables:
        return {}
    consumer = Consumer(consumer_config(bootstrap, reader=reader_group(spec.group), extra=kafka))
    follower = Follower(consumer)
    tables = {}
    try:
        for name, declared in spec.global_tables.items():
            topic = declared.topic
            decode = functools.partial(
                decode_table_value, name, topic, table_decoder(pipeline, topic, registry)
            )
            table = tables[name] = MemoryGlobalTable(name, declared.history_ms, decode)
            loading = _Loading(table, topic, wall)
            meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
            if meta is None or (
                meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            ):  # refused as `run` does (framework/streaming/wiring.py), never read empty
                raise PipelineError(
                    f"{spec.group} reads global table {name!r} from {topic!r}, which does "
                    "not exist: create the topic (or fix its name)"
                )
            for p in meta.partitions:
                loading.positions[p] = 0
                follower.replicas[(topic, p)] = loading
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in follower.replicas])
        follower.sync(follower.replicas)
    finally:
        consumer.close()
    return tables
