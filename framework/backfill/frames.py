"""What the Spark tasks of a backfill read, as DataFrames: Spark's own Kafka source over the
plan's ranges (read_committed), the latest committed state and pending timers of every key,
and the input records routed to their keys by the inputs' key extractors on the workers, all
grouped by key into the plan's tasks and sorted within each task (state, timers, then records
in timestamp order, ties in offset order)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from framework.backfill import arrow as on_arrow
from framework.backfill.plan import Plan, Range, co_partitioned
from framework.backfill.session import kafka_source
from framework.backfill.task import BAD, COLUMNS, IDS, RECORD, RECORD_CONSTANTS, STATE, TIMER, route
from framework.core.dedup import decode_segment
from framework.core.part import reader_group
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.kafka.config import consumer_config
from framework.kafka.registry_settings import RegistrySettings

log = logging.getLogger(__name__)


def max_timestamps(
    spark: Any, ranges: tuple[Range, ...], bootstrap: str, kafka: dict, limits: dict[str, int]
) -> dict[tuple[str, int], int]:
    """The highest record timestamp per topic-partition over the range, leaving out those
    beyond their topic's skew allowance (`limits`: topic -> latest timestamp, as
    `future_records.future_limit` gives it) as streaming's watermark does; a partition with
    none left is absent (one Spark job that reads only timestamps, no Python)."""
    from pyspark.sql import functions as F

    frame = read(spark, ranges, bootstrap, kafka)
    if frame is None:
        return {}
    ts, limit = F.unix_millis("timestamp"), F.lit(2**63 - 1)
    for topic, at in limits.items():
        limit = F.when(F.col("topic") == topic, F.lit(at)).otherwise(limit)
    high = F.max(F.when(ts <= limit, ts)).alias("m")
    rows = frame.groupBy("topic", "partition").agg(high).collect()
    return {(r["topic"], r["partition"]): r["m"] for r in rows if r["m"] is not None}


def read(spark: Any, ranges: Iterable[Range], bootstrap: str, kafka: dict) -> Any:
    """Spark's Kafka source over the non-empty ranges (read_committed), None if all are empty."""
    ranges = [r for r in ranges if r.end > r.start]
    if not ranges:
        return None
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for r in ranges:
        assign.setdefault(r.topic, []).append(r.partition)
        starting.setdefault(r.topic, {})[str(r.partition)] = r.start
        ending.setdefault(r.topic, {})[str(r.partition)] = r.end
    return (
        kafka_source(spark, bootstrap, kafka)
        .option("includeHeaders", "true")
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
    )


def _one_task_per_partition(plan: Plan, keyed: Any) -> bool:
    """Whether the plan's tasks are the Kafka source's partitions (`plan.co_partitioned`)."""
    return co_partitioned(plan.ranges) == plan.tasks == keyed.rdd.getNumPartitions()


def journal_ranges(
    topic: str, ends: dict[int, int], bootstrap: str, reader: str, kafka: dict
) -> list[Range]:
    consumer = Consumer(consumer_config(bootstrap, reader=reader, extra=kafka))
    try:
        lows = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[0] for p in ends}
    finally:
        consumer.close()
    return [Range(topic, p, lows[p], end, "", True) for p, end in ends.items()]


def exploded_ids(ids: Any) -> Any:
    """Segments of an `.ids` journal (`key`, `value` columns) as a row per id they hold, with
    `s` (the segment's start and ids) and `e` (the id's key and id)."""
    from pyspark.sql import functions as F

    @F.udf("struct<start:long,ids:array<struct<key:string,id:string>>>")
    def segment(key, value):
        decoded = decode_segment(bytes(key), bytes(value))
        return decoded.start, decoded.ids

    return ids.withColumn("s", segment("key", "value")).withColumn("e", F.explode("s.ids"))


def events(spark: Any, pipeline: Pipeline, spec: ComputationSpec, plan: Plan, bootstrap: str,
           kafka: dict, registry: RegistrySettings | None, arrow: bool = True) -> Any:  # fmt: skip
    """Every row the tasks need, grouped by key into `plan.tasks` Spark partitions and sorted
    within each: committed state, pending timers, then input records in timestamp order.
    Re-keyed records are routed on Arrow batches (`arrow.routed`), else by a row UDF."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    headers_type = T.ArrayType(
        T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
    )

    def latest(topic: str, ends: dict[int, int]) -> Any:
        ranges = journal_ranges(topic, ends, bootstrap, reader_group(spec.group), kafka)
        frame = read(spark, ranges, bootstrap, kafka)
        if frame is None:
            return None
        newest = Window.partitionBy("key").orderBy(F.col("offset").desc())
        return (
            frame.withColumn("_rank", F.row_number().over(newest))
            .where((F.col("_rank") == 1) & F.col("value").isNotNull())
            .drop("_rank")
        )

    def journal(frame: Any, kind: int, key: Any, ts: Any = None) -> Any:
        return frame.select(
            F.lit(kind).alias("kind"),
            key.alias("key"),
            (F.lit(None).cast("long") if ts is None else ts).alias("ts"),
            F.col("topic"),
            F.col("partition"),
            F.col("offset"),
            F.col("key").alias("kafka_key"),
            F.col("value"),
            F.lit(None).cast(headers_type).alias("headers"),
            F.lit(None).cast("string").alias("stream"),
            F.lit(True).alias("keyed"),
            F.lit(None).cast("string").alias("stage"),
            F.lit(None).cast("string").alias("error_type"),
            F.lit(None).cast("string").alias("error"),
        )

    parts = []
    state = latest(spec.changelog, plan.changelog_end)
    if state is not None:
        parts.append(journal(state, STATE, F.col("key").cast("string")))
    timers = latest(spec.timers, plan.timers_end)
    if timers is not None:
        user_key = F.from_json(F.col("key").cast("string"), "array<string>").getItem(0)
        parts.append(journal(timers, TIMER, user_key))
    ids = latest(spec.ids, plan.ids_end) if plan.ids_end else None
    if ids is not None:  # a row per id of each segment, with its key: value = id, ts = start
        exploded = exploded_ids(ids).withColumn("value", F.col("e.id").cast("binary"))
        parts.append(journal(exploded, IDS, F.col("e.key"), F.col("s.start")))
    streams = {r.topic: (r.stream, r.keyed) for r in plan.ranges}
    stream_of = F.create_map(*[F.lit(x) for t, (s, _) in streams.items() for x in (t, s)])
    ts = F.unix_millis("timestamp").alias("ts")
    kind = F.when(F.col("r.stage").isNull(), RECORD).otherwise(BAD).alias("kind")
    bad_key = F.concat_ws("|", F.lit("\u0000bad"), "topic", "partition", "offset")
    columns_after_key = ["ts", "topic", "partition", "offset", F.col("key").alias("kafka_key"),
                         "value", "headers", "stream", "keyed"]  # fmt: skip

    # records whose Kafka key is the computation's key: no Python before the shuffle (a key
    # that is not UTF-8 is dead-lettered by the task, which decodes it)
    keyed = read(spark, [r for r in plan.ranges if r.keyed], bootstrap, kafka)
    if keyed is not None:
        frame = keyed.select("*", ts, stream_of[F.col("topic")].alias("stream"),
                             F.lit(True).alias("keyed"))  # fmt: skip
        parts.append(
            frame.select(
                F.lit(RECORD).alias("kind"),
                F.coalesce(F.col("key").cast("string"), F.lit("")).alias("key"),
                *columns_after_key,
                *[F.lit(None).cast("string").alias(c) for c in ("stage", "error_type", "error")],
            )
        )
    # records a key extractor routes: decoded on the workers, before the shuffle
    rekeyed = read(spark, [r for r in plan.ranges if not r.keyed], bootstrap, kafka)
    if rekeyed is not None:
        frame = rekeyed.select(
            "topic", "partition", "offset", "key", "value", ts, "headers",
            stream_of[F.col("topic")].alias("stream"), F.lit(False).alias("keyed"),
        )  # fmt: skip
        if arrow:
            added = [T.StructField(c, T.StringType()) for c in on_arrow.ROUTED]
            frame = frame.mapInArrow(
                lambda batches: on_arrow.routed(pipeline, registry, spec, batches),
                T.StructType([*frame.schema.fields, *added]),
            ).select("*", F.struct(*[F.col(c).alias(c[2:] if c == "r_key" else c)
                                     for c in on_arrow.ROUTED]).alias("r"))  # fmt: skip
        else:
            routed_type = "struct<key:string,stage:string,error_type:string,error:string>"

            @F.udf(routed_type)
            def routed(topic, partition, offset, key, value, ts, headers):
                hs = [(h.key, h.value) for h in headers or ()]
                return route(pipeline, registry, spec, topic, partition, offset, key, value,
                             ts, hs)  # fmt: skip

            frame = frame.withColumn(
                "r", routed("topic", "partition", "offset", "key", "value", "ts", "headers")
            )
        parts.append(
            frame.select(
                kind,
                F.coalesce(F.col("r.key"), bad_key).alias("key"),
                *columns_after_key,
                F.col("r.stage").alias("stage"),
                F.col("r.error_type").alias("error_type"),
                F.col("r.error").alias("error"),
            )
        )
    if not parts:
        return None
    if arrow and len(parts) == 1 and keyed is not None and _one_task_per_partition(plan, keyed):
        # keyed by the producer, no state or timers yet: each Kafka partition is a task, and
        # what every row shares is not sent (`task.RECORD_CONSTANTS`)
        log.info("%s: %d tasks, one per input partition, no shuffle", spec.group, plan.tasks)
        varying = [c for c in COLUMNS if c not in RECORD_CONSTANTS]
        return parts[0].select(*varying).sortWithinPartitions("ts", "topic", "partition", "offset")
    events = parts[0]
    for part in parts[1:]:
        events = events.unionByName(part)
    return (
        events.select(*COLUMNS)
        .repartition(plan.tasks, "key")
        .sortWithinPartitions("kind", "ts", "topic", "partition", "offset")
    )
