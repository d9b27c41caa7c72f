"""`logwheel backfill`: run a computation over its inputs' history on Spark, then hand over to
`logwheel run` with nothing missing and nothing twice (D-Streams' argument: one programming
model, one `Computation` class, for batch and streaming).

The backfill starts where the computation stands, as a streaming instance would: from its
consumer group's committed offsets (else `--from`), with the state, pending timers and input
watermark its changelog, timer journal and watermark channel hold. Spark's own Kafka source
reads the range (read_committed); each input's key extractor routes the records; Spark groups
them by key over as many tasks as the cluster offers; each task runs the user's class through
the same `Executor` as the Harness and the Kafka task (`framework.backfill.task`). Then every
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
  ids, hence their completions, are the same) instead of making a new one, once it is seen
  to be this computation's, as its topics are now (`stored_plan`).
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

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from framework.backfill import arrow as on_arrow
from framework.backfill.authentication import driver_settings
from framework.backfill.frames import events as frames
from framework.backfill.plan import PLAN_KEY, Plan, backfill_topic, backfill_topic_spec, done_key
from framework.backfill.planning import make_plan, start_watermarks
from framework.backfill.session import spark_version
from framework.backfill.stored_plan import check_stored, read_backfill_topic, write_plan
from framework.backfill.task import TaskSettings, run_task
from framework.core.api import MIN_TIME
from framework.core.forgery import pipeline_allowance
from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.core.watermarks import Mark, encode_mark, naming_all, task_producer
from framework.kafka.config import client_config
from framework.kafka.groups import commit_metadata, commit_with_offsets, refuse_live_members
from framework.kafka.registry_settings import RegistrySettings, resolve
from framework.kafka.stream_codecs import check_registry
from framework.kafka.topics import ensure_topics

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
    skipped: int  # tasks an earlier run of the same plan had committed (not counted above)
    seconds: float
    resumed: bool

    def line(self, group: str) -> str:
        rate = self.records_in / self.seconds if self.seconds > 0 else 0.0
        return (
            f"backfill {group}: {self.records_in} records in, {self.records_out} out, "
            f"{self.keys} keys, {self.dead_letters} dead letters, {self.seconds:.1f} s, "
            f"{rate:.0f} records/s"
            + (
                f" (finished plan {self.plan}: {self.skipped} tasks were done)"
                if self.resumed
                else ""
            )
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
    registry: RegistrySettings | None = None,
    tasks: int | None = None,
    progress: bool = False,
    arrow: bool = True,
) -> Summary:
    """Run `computation` over its history on Spark (a session of `master` unless `spark` is
    given) and hand its place over to streaming; returns what it did. `arrow=False` takes the
    row path (pickled rows to the tasks): the same outputs, kept to prove the Arrow one."""
    began, wall = time.monotonic(), time.time()
    timeline: list[tuple[str, float]] = []
    spec = pipeline[computation]
    if spec.tables:
        raise PipelineError(
            f"{spec.group} reads tables {sorted(spec.tables)}, which the backfill does not "
            "serve yet: process its history with `logwheel reset` and `logwheel run`"
        )
    if spark is None:
        spark_version()  # Spark is an extra: say so before anything else
        driver_settings(master, spark_conf or {})  # and a master's missing secret
    # the executors get the registry resolved here (their environment may not name it); a
    # registry that is down, or refuses an output's schema, fails here
    registry = resolve(pipeline, registry)
    check_registry(pipeline, spec, registry)
    kafka = dict(kafka or {})
    admin = AdminClient(client_config(bootstrap, kafka))
    refuse_live_members(admin, spec, then="backfill")
    ensure_topics(admin, [backfill_topic_spec(spec)])
    stored = read_backfill_topic(bootstrap, backfill_topic(spec), kafka).get(PLAN_KEY)
    plan = Plan.from_json(stored, pipeline_allowance(pipeline)) if stored else None
    resumed = plan is not None and plan.status == "running"
    if resumed:
        check_stored(plan, spec, bootstrap, kafka)  # this computation's, as it is now
    own_session = spark is None
    if own_session:
        from framework.backfill.session import session

        # rich draws the stages when `progress`; Spark's own console bar would fight it
        quiet = {"spark.ui.showConsoleProgress": "false"} if progress else {}
        spark = session(master, f"logwheel-backfill-{spec.group}", {**quiet, **(spark_conf or {})})
    timeline.append(("session", time.monotonic() - began))
    try:
        if resumed:
            log.info("%s: finishing the backfill plan %s left unfinished", spec.group, plan.id)
        else:
            plan = make_plan(spark, pipeline, spec, bootstrap, kafka, start, until, tasks, arrow)
            write_plan(bootstrap, spec, plan, kafka)
        timeline.append(("plan", time.monotonic() - began))
        results = _run(spark, pipeline, spec, plan, bootstrap, kafka, registry, progress, arrow)
        timeline.append(("tasks", time.monotonic() - began))
        _finish(spec, plan, results, bootstrap, kafka)
        timeline.append(("hand-over", time.monotonic() - began))
    finally:
        if own_session:
            spark.stop()
    _log_timeline(spec.group, timeline, results, wall)
    return summary_of(plan, results, time.monotonic() - began, resumed)


def summary_of(plan: Plan, results: list[dict], seconds: float, resumed: bool) -> Summary:
    """What the tasks' completion records add up to; a task an earlier run of the plan had
    committed is counted as skipped, its records not again."""
    ran = [r for r in results if not r.get("skipped")]
    return Summary(
        plan=plan.id,
        records_in=sum(r["records_in"] for r in ran),
        records_out=sum(r["records_out"] for r in ran),
        keys=sum(r["keys"] for r in ran),
        dead_letters=sum(r["dead_letters"] for r in ran),
        late=sum(r["late"] for r in ran),
        tasks=plan.tasks,
        skipped=len(results) - len(ran),
        seconds=seconds,
        resumed=resumed,
    )


def _log_timeline(group: str, timeline: list, results: list[dict], wall: float) -> None:
    """Where the time went, in seconds since the backfill began (one log line): the session,
    the plan, the first task's start and the last task's end on the workers' clocks, the
    tasks' job and the hand-over."""
    ran = [r for r in results if "began" in r]
    if ran:
        timeline.append(("first task", min(r["began"] for r in ran) - wall))
        timeline.append(("last task", max(r["ended"] for r in ran) - wall))
    line = ", ".join(f"{what} {at:.1f}" for what, at in sorted(timeline, key=lambda x: x[1]))
    log.info("backfill %s timeline (s): %s", group, line)


# -- running the plan -----------------------------------------------------------------------


def _run(spark: Any, pipeline: Pipeline, spec: ComputationSpec, plan: Plan, bootstrap: str,
         kafka: dict, registry: RegistrySettings | None, progress: bool,
         arrow: bool) -> list[dict]:  # fmt: skip
    """Run every task of the plan; returns their completion records."""
    events = frames(spark, pipeline, spec, plan, bootstrap, kafka, registry, arrow)
    if events is None:
        return []
    settings = TaskSettings(
        pipeline=pipeline,
        spec=spec,
        plan_id=plan.id,
        bootstrap=bootstrap,
        kafka=kafka,
        registry=registry,
        backfill_topic=backfill_topic(spec),
        start_watermark=plan.start_watermark,
        end_watermark=plan.end_watermark,
        lag=plan.lag,
        wall=plan.created_at,
    )

    with _Progress(spark, plan, enabled=progress):
        if arrow:
            # Arrow batches in, one completion record out per task: no pickled rows
            done = events.mapInArrow(lambda rows: on_arrow.task(settings, rows), "result string")
            return [json.loads(r["result"]) for r in done.collect()]

        def task(index: int, rows: Iterator[Any]) -> Iterator[str]:
            yield run_task(settings, index, rows)

        return [json.loads(r) for r in events.rdd.mapPartitionsWithIndex(task).collect()]


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
                            f"Spark stage {stage_id}, tasks", total=info.numTasks
                        )
                    shown.update(bars[stage_id], completed=info.numCompletedTasks)


# -- handing over ------------------------------------------------------------------------


def hand_over_marks(
    spec: ComputationSpec,
    plan: Plan,
    results: list[dict],
    previous: dict[str, Mark],
    counts: dict[str, int],
) -> list[Mark]:
    """The mark each key-space partition's streaming task would publish after the plan: its
    input watermark the plan's end (never below its previous mark's), held back by the
    earliest timer the tasks left pending; the last offset written to each output partition,
    by this backfill or before it (`counts`: the outputs' partition counts). Watermarks never
    go back: a mark is at least the one it replaces."""
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
        # a Percentile's watermark may be ahead of the strict one; marks promise the strict one
        strict = input_watermark if spec.low_watermark is None else end
        low = spec.output_watermark(strict, earliest.get(p))
        offsets = dict(prev.offsets) if prev else {}
        for tp, offset in written.items():
            offsets[tp] = max(offset, offsets.get(tp, -1))
        offsets = naming_all(offsets, spec.outputs, counts)
        watermark = max(low, prev.watermark if prev else MIN_TIME)
        marks.append(Mark(producer, watermark, False, offsets, input_watermark))
    return marks


def _finish(spec: ComputationSpec, plan: Plan, results: list[dict], bootstrap: str,
            kafka: dict) -> None:  # fmt: skip
    """In one transaction: a mark per key-space partition, the group's offsets at the end of
    the range, the plan done and the task completions removed."""
    _, previous = start_watermarks(bootstrap, spec, kafka)
    topics = AdminClient(client_config(bootstrap, kafka)).list_topics(timeout=30).topics
    counts = {t: len(topics[t].partitions) for t in spec.outputs if t in topics}
    marks = hand_over_marks(spec, plan, results, previous, counts)
    records = [(spec.watermarks, m.producer.encode(), encode_mark(m)) for m in marks]
    topic = backfill_topic(spec)
    done = replace(plan, status="done")
    records.append((topic, PLAN_KEY.encode(), done.to_json()))
    records += [(topic, done_key(plan.id, i).encode(), None) for i in range(plan.tasks)]
    metadata = commit_metadata(f"backfill/{plan.id}")
    offsets = [TopicPartition(r.topic, r.partition, r.end, metadata=metadata) for r in plan.ranges]
    finish = f"{spec.group}.backfill.{plan.id}.finish"
    commit_with_offsets(bootstrap, kafka, finish, spec.group, records, offsets)
