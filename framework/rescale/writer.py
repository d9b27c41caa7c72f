"""Writing a view (framework/rescale/views.py) to N partitions, on Spark's workers: each row to
the partition Kafka's producer gives its key (`kafka.partitioning.bytes_partition`, one piece
of code with the backfill's), a key's pending records in their order, and the ids of each old
`.ids` segment regrouped into one segment per new partition.

Spark's Kafka sink cannot carry a record's timestamp, which is a pending record's event time,
and retries tasks at least once; so, as the backfill's tasks do, each Spark task writes with a
transactional producer of its own (`<prefix>.<task>`): a retried task fences its failed
attempt, whose records no read_committed reader sees. A task whose commit succeeded but whose
result was lost would write twice: the verification that follows every write counts each
key's rows and refuses the result.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from framework.backfill.task import TRANSACTION_TIMEOUT_MS
from framework.core.dedup import SEGMENT_IDS, encode_segment
from framework.errors import Retry
from framework.kafka.config import producer_config
from framework.kafka.partitioning import bytes_partition
from framework.rescale.views import ID, PENDING, STATE, TIMER, Topics

RESULT = "topic string, partition int, count long, last long"


@dataclass(frozen=True)
class Written:
    """Per topic-partition: records written and the offset of the last one (-1: none)."""

    counts: dict[tuple[str, int], int]
    last: dict[tuple[str, int], int]


def write_view(
    frame: Any,
    targets: Topics,
    partitions: int,
    bootstrap: str,
    kafka: dict | None,
    transactional_prefix: str,
    tasks: int,
) -> Written:
    """Write every row of `frame` to `targets` with `partitions` partitions, in `tasks` Spark
    tasks (a key's rows all in one), each in one transaction."""
    ordered = frame.repartition(tasks, "key").sortWithinPartitions("kind", "segment", "key", "seq")
    config = {
        **producer_config(bootstrap, extra=kafka),
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
    }

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        yield from _task(batches, targets, partitions, config, transactional_prefix)

    rows = ordered.mapInArrow(run, RESULT).collect()
    counts: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    for r in rows:
        tp = (r["topic"], r["partition"])
        counts[tp] = counts.get(tp, 0) + r["count"]
        last[tp] = max(last.get(tp, -1), r["last"])
    return Written(counts, last)


def segment_key(start: int, old: bytes, partition: int, first: str, chunk: int) -> bytes:
    """The key of a regrouped id segment, `[start, hex]` as `SeenIds` makes them: the same on
    every run of the same rescale (a key's ids are all in one task, so the first key of a chunk
    tells the chunks of one old segment apart)."""
    digest = hashlib.sha256(b"%s|%d|%s|%d" % (old, partition, first.encode(), chunk))
    return json.dumps([start, digest.hexdigest()[:16]]).encode()


def _task(
    batches: Iterator[Any], targets: Topics, partitions: int, config: dict, prefix: str
) -> Iterator[Any]:
    import pyarrow as pa
    from confluent_kafka import Producer
    from pyspark import TaskContext

    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    producer = Producer({**config, "transactional.id": f"{prefix}.{task}"})
    counts: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    errors: list[str] = []

    def delivered(err, msg) -> None:  # must not raise (a librdkafka callback)
        if err is not None:
            errors.append(str(err))
            return
        tp = (msg.topic(), msg.partition())
        counts[tp] = counts.get(tp, 0) + 1
        last[tp] = max(last.get(tp, -1), msg.offset())

    def send(topic: str, partition: int, key, value, headers, ts) -> None:
        kwargs = {"timestamp": ts} if ts is not None and ts >= 0 else {}
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, headers=headers,
                                 on_delivery=delivered, **kwargs)  # fmt: skip
                return
            except BufferError:
                producer.poll(0.1)

    journal = {STATE: targets.changelog, TIMER: targets.timers}
    segments: dict[tuple[int, bytes, int], list[tuple[str, str]]] = {}
    producer.init_transactions(60)
    producer.begin_transaction()
    for batch in batches:
        for row in batch.to_pylist():
            kind, place = row["kind"], row["place"]
            partition = bytes_partition(bytes(place), partitions)
            if kind == ID:
                group = (partition, bytes(row["segment"]), row["start"])
                segments.setdefault(group, []).append((row["key"], row["value"].decode()))
                continue
            topic = targets.by_key[row["stream"]] if kind == PENDING else journal[kind]
            headers = [(h["key"], h["value"]) for h in row["headers"] or ()]
            send(topic, partition, row["kafka_key"], row["value"], headers or None, row["ts"])
    for (partition, old, start), ids in segments.items():
        assert targets.ids is not None
        for chunk, i in enumerate(range(0, len(ids), SEGMENT_IDS)):
            part = ids[i : i + SEGMENT_IDS]
            key = segment_key(start, old, partition, part[0][0], chunk)
            send(targets.ids, partition, key, encode_segment(start, part), None, None)
    producer.flush(120)
    if errors or len(producer):
        producer.abort_transaction(60)
        raise Retry(f"rescale task {task}: writes failed: {errors[:3] or 'not delivered'}")
    producer.commit_transaction(120)
    rows = [(t, p, n, last[(t, p)]) for (t, p), n in counts.items()]
    yield pa.RecordBatch.from_pylist(
        [{"topic": t, "partition": p, "count": n, "last": o} for t, p, n, o in rows],
        schema=pa.schema(
            [
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("count", pa.int64()),
                ("last", pa.int64()),
            ]
        ),  # fmt: skip
    )
