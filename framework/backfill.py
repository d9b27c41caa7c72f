"""`logwheel backfill`: run a computation over its inputs' history on Spark, then hand over to
`logwheel run` with nothing missing and nothing twice (D-Streams' argument: one programming
model, one `Computation` class, for batch and streaming).

The backfill starts where the computation stands, as a streaming instance would: from its
consumer group's committed offsets (else `--from`), with the state, pending timers and input
watermark its changelog, timer journal and watermark channel hold. Spark's own Kafka source
reads the range (read_committed); each input's key extractor routes the records; Spark groups
them by key over as many tasks as the cluster offers; each task runs the user's class through
the same `Executor` as the Harness and the Kafka task (`framework.backfill_task`). Then every
key-space partition gets the watermark mark its streaming task would publish, and the group's
offsets move to the end of the range on every topic it consumes.

Exactly once across Spark retries, and why this way:

- Spark's Kafka sink is at-least-once (a retried task writes again), so outputs do not go
  through it. Each Spark task writes with a transactional producer of its own, its
  `transactional.id` derived from the computation, the plan and the task's index:
  `<pipeline>.<computation>.backfill.<plan id>.<task>`. A retry (same id) fences its
  predecessor and aborts whatever that left open, so a `read_committed` reader never sees a
  failed attempt's outputs, changelog or journal records.
- The transaction also carries a completion record (`done/<plan id>/<task>`) on the compacted
  topic `<pipeline>.<computation>.backfill`; a retry of a task whose transaction committed
  finds it and skips, so it cannot write twice either. One transaction per task instead of
  per batch keeps this simple and exact; its cost is that read_committed readers of the
  outputs wait for a task's commit, and the transaction timeout (10 min) bounds a task:
  more Spark tasks (`spark.default.parallelism`) make each one shorter.
- The plan (ranges, split, watermarks) is written to the same topic before any task runs;
  a backfill that dies is run again with the same command and finishes that plan (its tasks'
  ids, hence their completions, are the same) instead of making a new one.
- Only once every task has committed do the marks, the group's offsets (through
  `send_offsets_to_transaction`) and the plan's `done` status commit, in one transaction:
  `logwheel run` then continues exactly where the backfill stopped. Streaming instances must
  not run meanwhile; the backfill refuses to start while the group has live members.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.api import MIN_TIME
from framework.backfill_plan import (
    PLAN_KEY,
    Plan,
    Range,
    backfill_topic,
    backfill_topic_spec,
    done_key,
    end_watermark,
    journal_ends,
    lag_of,
    read_backfill_topic,
    resolve_ranges,
    start_watermarks,
    write_plan,
)
from framework.backfill_task import BAD, RECORD, STATE, TIMER, TaskSettings, route, run_task
from framework.clock import now_ms
from framework.kafka import client_config, consumer_config, producer_config
from framework.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.reset import refuse_live_members
from framework.watermarks import Mark, encode_mark, task_producer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Summary:
    """What a backfill did."""

    plan: str
    records_in: int
    records_out: int
    keys: int
    dead_letters: int
    late: int
    tasks: int
    skipped: int  # tasks an earlier run of the same plan had committed
    seconds: float
    resumed: bool

    def line(self, group: str) -> str:
        rate = self.records_in / self.seconds if self.seconds > 0 else 0.0
        return (
            f"backfill {group}: {self.records_in} records in, {self.records_out} out, "
            f"{self.keys} keys, {self.dead_letters} dead letters, {self.seconds:.1f} s, "
            f"{rate:.0f} records/s"
        )


def backfill(
    pipeline: Pipeline,
    computation: str,
    *,
    bootstrap: str,
    start: str = "earliest",
    until: str = "latest",
    spark: Any = None,
    master: str = "local[*]",
    spark_conf: dict | None = None,
    kafka: dict | None = None,
    tasks: int | None = None,
    progress: bool = False,
) -> Summary:
    """Run `computation` over its history on Spark (a session of `master` unless `spark` is
    given) and hand its place over to streaming; returns what it did."""
    began = time.monotonic()
    spec = pipeline[computation]
    kafka = dict(kafka or {})
    admin = AdminClient(client_config(bootstrap, kafka))
    refuse_live_members(admin, spec, then="backfill")
    _ensure_backfill_topic(admin, spec)
    own_session = spark is None
    if own_session:
        from framework.spark import session

        spark = session(master, f"logwheel-backfill-{spec.group}", spark_conf)
    try:
        stored = read_backfill_topic(bootstrap, backfill_topic(spec), kafka).get(PLAN_KEY)
        plan = Plan.from_json(stored) if stored else None
        resumed = plan is not None and plan.status == "running"
        if resumed:
            log.info("%s: finishing the backfill plan %s left unfinished", spec.group, plan.id)
        else:
            plan = _make_plan(spark, pipeline, spec, bootstrap, kafka, start, until, tasks)
            write_plan(bootstrap, spec, plan, kafka)
        results = _run(spark, pipeline, spec, plan, bootstrap, kafka, progress)
        _finish(spec, plan, results, bootstrap, kafka)
    finally:
        if own_session:
            spark.stop()
    return Summary(
        plan=plan.id,
        records_in=sum(r["records_in"] for r in results),
        records_out=sum(r["records_out"] for r in results),
        keys=sum(r["keys"] for r in results),
        dead_letters=sum(r["dead_letters"] for r in results),
        late=sum(r["late"] for r in results),
        tasks=plan.tasks,
        skipped=sum(1 for r in results if r.get("skipped")),
        seconds=time.monotonic() - began,
        resumed=resumed,
    )


def _ensure_backfill_topic(admin: AdminClient, spec: ComputationSpec) -> None:
    topic = backfill_topic_spec(spec)
    if topic.name in admin.list_topics(timeout=30).topics:
        return
    new = NewTopic(topic.name, topic.partitions, -1, config=dict(topic.config))
    for future in admin.create_topics([new], operation_timeout=30).values():
        try:
            future.result()
        except Exception as error:  # a concurrent creator is fine
            if "already exists" not in str(error).lower():
                raise PipelineError(f"cannot create {topic.name}: {error}") from None


# -- the plan -------------------------------------------------------------------------------


def _make_plan(
    spark: Any,
    pipeline: Pipeline,
    spec: ComputationSpec,
    bootstrap: str,
    kafka: dict,
    start: str,
    until: str,
    tasks: int | None,
) -> Plan:
    config = consumer_config(bootstrap, extra=kafka)
    config["group.id"] = spec.group
    consumer = Consumer(config)
    try:
        ranges = resolve_ranges(consumer, spec, start, until)
        changelog_end = journal_ends(consumer, spec.changelog, spec.partitions)
        timers_end = journal_ends(consumer, spec.timers, spec.partitions)
    finally:
        consumer.close()
    lag = lag_of(pipeline, spec)
    bounded = _bounded(pipeline, spec)
    highs = _max_timestamps(spark, ranges, bootstrap, kafka) if bounded else {}
    starts, _ = start_watermarks(bootstrap, spec, kafka)
    end = end_watermark(pipeline, spec, ranges, highs, bootstrap, kafka)
    return Plan(
        computation=spec.name,
        ranges=ranges,
        tasks=tasks or max(1, spark.sparkContext.defaultParallelism),
        changelog_end=changelog_end,
        timers_end=timers_end,
        start_watermarks=starts,
        end_watermark=end,
        lag=lag,
    )


def _bounded(pipeline: Pipeline, spec: ComputationSpec) -> bool:
    from framework.pipeline import BoundedOutOfOrderness

    policies = [getattr(pipeline.sources.get(i.stream), "watermark", None) for i in spec.inputs]
    return any(isinstance(p, BoundedOutOfOrderness) for p in policies)


def _max_timestamps(
    spark: Any, ranges: tuple[Range, ...], bootstrap: str, kafka: dict
) -> dict[tuple[str, int], int]:
    """The highest record timestamp per topic-partition over the range (one Spark job that
    reads only timestamps, no Python)."""
    from pyspark.sql import functions as F

    frame = _read(spark, ranges, bootstrap, kafka)
    if frame is None:
        return {}
    rows = frame.groupBy("topic", "partition").agg(F.max(F.unix_millis("timestamp")).alias("m"))
    return {(r["topic"], r["partition"]): r["m"] for r in rows.collect()}


# -- the Spark job ------------------------------------------------------------------------


def _read(spark: Any, ranges: Iterator[Range] | tuple, bootstrap: str, kafka: dict) -> Any:
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
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
    )
    for key, value in kafka.items():
        reader = reader.option(f"kafka.{key}", str(value))
    return reader.load()


def _journal_ranges(topic: str, ends: dict[int, int], bootstrap: str, kafka: dict) -> list[Range]:
    consumer = Consumer(consumer_config(bootstrap, extra=kafka))
    try:
        lows = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[0] for p in ends}
    finally:
        consumer.close()
    return [Range(topic, p, lows[p], end, "", True) for p, end in ends.items()]


def _events(spark: Any, pipeline: Pipeline, spec: ComputationSpec, plan: Plan, bootstrap: str,
            kafka: dict) -> Any:  # fmt: skip
    """Every row the tasks need, grouped by key into `plan.tasks` Spark partitions and sorted
    within each: committed state, pending timers, then input records in timestamp order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    headers_type = T.ArrayType(
        T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
    )
    columns = ["kind", "key", "ts", "topic", "partition", "offset", "kafka_key", "value",
               "headers", "stream", "keyed", "stage", "error_type", "error"]  # fmt: skip

    def latest(topic: str, ends: dict[int, int]) -> Any:
        frame = _read(spark, _journal_ranges(topic, ends, bootstrap, kafka), bootstrap, kafka)
        if frame is None:
            return None
        newest = Window.partitionBy("key").orderBy(F.col("offset").desc())
        return (
            frame.withColumn("_rank", F.row_number().over(newest))
            .where((F.col("_rank") == 1) & F.col("value").isNotNull())
            .drop("_rank")
        )

    def journal(frame: Any, kind: int, key: Any) -> Any:
        return frame.select(
            F.lit(kind).alias("kind"),
            key.alias("key"),
            F.lit(None).cast("long").alias("ts"),
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
    records = _read(spark, plan.ranges, bootstrap, kafka)
    if records is not None:
        streams = {r.topic: (r.stream, r.keyed) for r in plan.ranges}
        stream_of = F.create_map(*[F.lit(x) for t, (s, _) in streams.items() for x in (t, s)])
        keyed_of = F.create_map(*[F.lit(x) for t, (_, k) in streams.items() for x in (t, k)])
        routed_type = "struct<key:string,stage:string,error_type:string,error:string>"

        @F.udf(routed_type)
        def routed(topic, partition, offset, key, value, ts, headers, keyed):
            hs = [(h.key, h.value) for h in headers or ()]
            return route(pipeline, spec, topic, partition, offset, key, value, ts, hs, keyed)

        ts = F.unix_millis("timestamp")
        frame = records.select(
            "*",
            ts.alias("ts"),
            stream_of[F.col("topic")].alias("stream"),
            keyed_of[F.col("topic")].alias("keyed"),
        ).withColumn(
            "r",
            routed("topic", "partition", "offset", "key", "value", "ts", "headers", "keyed"),
        )
        bad_key = F.concat_ws("|", F.lit("\u0000bad"), "topic", "partition", "offset")
        parts.append(
            frame.select(
                F.when(F.col("r.stage").isNull(), RECORD).otherwise(BAD).alias("kind"),
                F.coalesce(F.col("r.key"), bad_key).alias("key"),
                "ts",
                "topic",
                "partition",
                "offset",
                F.col("key").alias("kafka_key"),
                "value",
                "headers",
                "stream",
                "keyed",
                F.col("r.stage").alias("stage"),
                F.col("r.error_type").alias("error_type"),
                F.col("r.error").alias("error"),
            )
        )
    if not parts:
        return None
    events = parts[0]
    for part in parts[1:]:
        events = events.unionByName(part)
    return (
        events.select(*columns)
        .repartition(plan.tasks, "key")
        .sortWithinPartitions("kind", "ts", "topic", "partition", "offset")
    )


def _run(spark: Any, pipeline: Pipeline, spec: ComputationSpec, plan: Plan, bootstrap: str,
         kafka: dict, progress: bool) -> list[dict]:  # fmt: skip
    """Run every task of the plan; returns their completion records."""
    events = _events(spark, pipeline, spec, plan, bootstrap, kafka)
    if events is None:
        return []
    settings = TaskSettings(
        pipeline=pipeline,
        spec=spec,
        plan_json=plan.to_json(),
        plan_id=plan.id,
        bootstrap=bootstrap,
        kafka=kafka,
        backfill_topic=backfill_topic(spec),
        start_watermark=plan.start_watermark,
        end_watermark=plan.end_watermark,
        lag=plan.lag,
    )

    def task(index: int, rows: Iterator[Any]) -> Iterator[str]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        yield run_task(settings, index, rows, attempt)

    job = events.rdd.mapPartitionsWithIndex(task)
    with _Progress(spark, plan, enabled=progress):
        return [json.loads(r) for r in job.collect()]


class _Progress:
    """Spark's stages and tasks on the terminal while the job runs (rich)."""

    def __init__(self, spark: Any, plan: Plan, enabled: bool) -> None:
        self.spark, self.plan, self.enabled = spark, plan, enabled
        self._stop = threading.Event()

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._show, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join(5)

    def _show(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        tracker = self.spark.sparkContext.statusTracker()
        bars: dict[int, Any] = {}
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, transient=True) as shown:
            shown.console.print(
                f"backfill plan {self.plan.id}: {self.plan.records()} records, "
                f"{self.plan.tasks} tasks"
            )
            while not self._stop.wait(0.5):
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is None:
                        continue
                    if stage_id not in bars:
                        bars[stage_id] = shown.add_task(
                            f"stage {stage_id} ({info.name[:30]})", total=info.numTasks
                        )
                    shown.update(bars[stage_id], completed=info.numCompletedTasks)


# -- handing over ------------------------------------------------------------------------


def _finish(spec: ComputationSpec, plan: Plan, results: list[dict], bootstrap: str,
            kafka: dict) -> None:  # fmt: skip
    """In one transaction: a mark per key-space partition, the group's offsets at the end of
    the range, the plan done and the task completions removed."""
    _, previous = start_watermarks(bootstrap, spec, kafka)
    written: dict[tuple[str, int], int] = {}
    earliest: dict[int, int] = {}
    for result in results:
        for topic, partition, offset in result.get("written", ()):
            if topic in spec.outputs:
                written[(topic, partition)] = max(offset, written.get((topic, partition), -1))
        for p, t in result.get("earliest_timers", {}).items():
            earliest[int(p)] = min(t, earliest.get(int(p), t))
    marks = []
    end = MIN_TIME if plan.end_watermark is None else plan.end_watermark
    for p in range(spec.partitions):
        producer = task_producer(spec.name, p)
        prev: Mark | None = previous.get(producer)
        input_watermark = max(end, prev.input_watermark if prev else MIN_TIME)
        low = min(input_watermark, earliest.get(p, input_watermark))
        offsets = dict(prev.offsets) if prev else {}
        for tp, offset in written.items():
            offsets[tp] = max(offset, offsets.get(tp, -1))
        watermark = max(low, prev.watermark if prev else MIN_TIME)
        marks.append(Mark(producer, watermark, False, offsets, input_watermark))

    config = producer_config(
        bootstrap, transactional_id=f"{spec.group}.backfill.{plan.id}.finish", extra=kafka
    )
    producer = Producer(config)
    consumer_conf = consumer_config(bootstrap, extra=kafka)
    consumer_conf["group.id"] = spec.group
    consumer = Consumer(consumer_conf)
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        for mark in marks:
            key = mark.producer.encode()
            producer.produce(spec.watermarks, encode_mark(mark), key, partition=0)
        topic = backfill_topic(spec)
        done = replace(plan, status="done")
        producer.produce(topic, done.to_json(), PLAN_KEY.encode(), partition=0)
        for index in range(plan.tasks):
            producer.produce(topic, None, done_key(plan.id, index).encode(), partition=0)
        metadata = json.dumps({"committed_at": now_ms(), "instance": f"backfill/{plan.id}"})
        offsets = [
            TopicPartition(r.topic, r.partition, r.end, metadata=metadata) for r in plan.ranges
        ]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
    finally:
        consumer.close()
