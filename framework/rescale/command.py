"""`logwheel rescale`: move a stopped computation's keyed data to N partitions, on Spark,
verified, so that `logwheel run` with `partitions=N` goes on as if it had always had N.

What moves: every key's latest state (changelog), pending timers (timer journal), seen record
ids (`.ids`, regrouped into segments per new partition) and the records still waiting in each
`.by-key` topic from the group's committed offsets — all read read_committed by Spark's own
Kafka source — each to the partition Kafka's producer gives its key (murmur2 of the key bytes,
`kafka/partitioning.py`). The watermark channel is rebuilt (framework/rescale/marks.py) and the
group's offsets set: each new `.by-key` partition from its start, each re-keyed source stream
where the group stood (its partition count does not change). An input read by its Kafka key
keeps its topic's count: such a computation is refused, with what to do. Any other topic of
its key space (one that dead letters are replayed through, say: `emptied`) is created again
empty with N partitions; the rescale refuses while it holds records the group has not read.

How the switch works. Kafka cannot rename a topic or change a compacted topic's partitioning,
and the contract fixes the names, so the data goes through staging topics:

1. Stage. With the group empty (no live members) and no open transaction on the old topics,
   note their offsets, write every key to the staging topics `<group>.rescale.changelog`,
   `.rescale.timers`, `.rescale.ids`, `.rescale.<stream>.by-key` (N partitions, emptied
   first), and verify old against staging key by key (per-key checksums, row counts, every row
   in its key's partition). Nothing of the old topics has changed: a rescale killed here, or
   whose verification fails, leaves them as they were — `run` with the old declaration still
   works — and running the command again stages afresh. Before going on it checks that the
   group is still empty and the old topics' ends have not moved.
2. Switch. The compacted record `switching` (N, the old count, the sources' offsets) goes to
   `<group>.rescale`; from here the staging topics are the truth. The old topics are deleted
   and created again with N partitions, the staging topics are copied into them and copy is
   verified against staging. A rescale killed anywhere in this step finds `switching` when run
   again, and deletes, creates, copies and verifies again from staging.
3. Finish, in one transaction: the rebuilt marks, the group's offsets and the record `done`.
   Then the staging topics are deleted. Local stores notice the new topics (their topic ids)
   and restore from them at the next start.

Running the command again after it finished does nothing. Downstream computations that read
this one's outputs expect a mark from each of its N tasks: run them with the same declaration.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.backfill.planning import start_watermarks
from framework.backfill.session import session
from framework.core.part import reader_group
from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.core.watermarks import encode_mark
from framework.kafka.config import client_config, producer_config
from framework.kafka.groups import commit_metadata, commit_with_offsets, refuse_live_members
from framework.kafka.topic_ends import read_compacted
from framework.kafka.topics import (
    COMPACT,
    DELETE,
    TopicSpec,
    create_topics,
    ensure_topics,
    pipeline_topics,
)
from framework.rescale.marks import rebuilt_marks
from framework.rescale.offsets import committed_of, delete_topics, ends_of, recreate
from framework.rescale.views import Topics, ranges_of, verify, view
from framework.rescale.writer import write_view

MARKER_KEY = b"rescale"
Offsets = dict[str, dict[int, tuple[int, int]]]


def topics_of(spec: ComputationSpec, staging: bool = False) -> Topics:
    """The computation's keyed topics, or (`staging`) the rescale's copies of them."""
    prefix = f"{spec.group}.rescale" if staging else spec.group
    return Topics(
        f"{prefix}.changelog",
        f"{prefix}.timers",
        f"{prefix}.ids" if spec.dedup is not None else None,
        {i.stream: f"{prefix}.{i.stream}.by-key" for i in spec.inputs if i.key is not None},
    )


def marker_topic(spec: ComputationSpec) -> str:
    return f"{spec.group}.rescale"


def emptied(pipeline: Pipeline, spec: ComputationSpec) -> list[str]:
    """Other topics of the computation's key space, which the rescale recreates empty with the
    new count instead of moving (a topic that dead letters are replayed through, say): every
    topic the plan gives this computation's partition count exactly, but for its journals,
    `.by-key` topics, streams and its watermark channel."""
    moved = set(topics_of(spec).all())
    return [
        t.name
        for t in pipeline_topics(pipeline)
        if spec.name in t.owners and t.exact and t.partitions == spec.partitions
        and t.kind not in ("stream", "watermarks") and t.name not in moved
    ]  # fmt: skip


def next_step(marker: dict | None, current: int, partitions: int) -> str:
    """What a run of the command does: "switch" (finish an interrupted switch), "nothing" (the
    topics already have `partitions`) or "stage" (from the start)."""
    if marker is not None and marker.get("status") == "switching":
        if marker["partitions"] != partitions:
            raise PipelineError(
                f"an interrupted rescale to {marker['partitions']} partitions has already "
                "replaced the old topics: finish it first (logwheel rescale ... --partitions "
                f"{marker['partitions']}), then rescale again"
            )
        return "switch"
    return "nothing" if current == partitions else "stage"


def rescale(
    pipeline: Pipeline,
    computation: str,
    partitions: int,
    *,
    bootstrap: str,
    master: str = "local[*]",
    spark: Any = None,
    spark_conf: dict | None = None,
    kafka: dict | None = None,
    dry_run: bool = False,
    report: Callable[[str], None] = lambda line: None,
    on_step: Callable[[str], None] = lambda step: None,
) -> list[str]:
    """Rescale `computation` to `partitions` (see the module doc); returns the lines it
    reported. `on_step` hears "staged", "switching", "deleted", "copied" and "done"."""
    spec = pipeline[computation]
    kafka = dict(kafka or {})
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        report(line)

    if partitions < 1:
        raise PipelineError(f"--partitions {partitions}: give a count of 1 or more")
    admin = AdminClient(client_config(bootstrap, kafka))
    counts = {n: len(t.partitions) for n, t in admin.list_topics(timeout=30).topics.items()}
    _refuse_unmovable(spec, counts, partitions)
    refuse_live_members(admin, spec, then="rescale")
    ensure_topics(admin, [TopicSpec(marker_topic(spec), 1, dict(COMPACT), "rescale", True)])
    raw = read_compacted(bootstrap, marker_topic(spec), reader_group(spec.group), kafka)
    marker = json.loads(raw[MARKER_KEY.decode()]) if MARKER_KEY.decode() in raw else None
    if spec.changelog not in counts and (marker is None or marker.get("status") != "switching"):
        raise PipelineError(
            f"{spec.changelog} does not exist: {spec.group} has no state to rescale; declare "
            f"it with partitions={partitions} and run it"
        )
    step = next_step(marker, counts.get(spec.changelog, 0), partitions)
    if step == "nothing":
        if not dry_run:  # a rescale killed between its finish and its clean-up left them
            delete_topics(admin, topics_of(spec, staging=True).all())
        say(f"{spec.group} already has {partitions} partitions: nothing to do")
        return lines
    if step == "switch" and dry_run:
        say(f"would: finish the interrupted switch of {spec.group} to {partitions} partitions "
            "from its staging topics")  # fmt: skip
        return lines
    owned = spark is None and not dry_run
    if owned:
        spark = session(master, f"logwheel-rescale-{spec.group}", spark_conf)
    try:
        if step == "stage":
            _refuse_unread(pipeline, spec, counts, bootstrap, kafka)
            marker = _stage(spec, partitions, counts, bootstrap, kafka, spark, dry_run, say)
            if dry_run:
                return lines
            on_step("staged")
            _write_marker(spec, marker, bootstrap, kafka)
            on_step("switching")
        assert marker is not None
        _switch(pipeline, spec, marker, bootstrap, kafka, spark, say, on_step)
    finally:
        if owned:
            spark.stop()
    return lines


def _refuse_unmovable(spec: ComputationSpec, counts: dict[str, int], partitions: int) -> None:
    for i in spec.inputs:
        if i.key is None:
            raise PipelineError(
                f"{spec.group} reads {i.stream!r} by its Kafka key: its partitions are that "
                f"topic's ({counts.get(i.stream)}), which rescale does not change. Read it with "
                "key_by(...) (its records are then re-keyed to the computation's partitions) "
                f"and rescale, or write it to a topic of {partitions} partitions and read that"
            )
    for name, topic in spec.tables.items():
        if counts.get(topic) != partitions:
            raise PipelineError(
                f"{spec.group} joins table {name!r} ({topic}, {counts.get(topic)} partitions), "
                f"co-partitioned with its key space: give the table {partitions} partitions "
                "first (rescale its own computation), then rescale this one"
            )


def _refuse_unread(pipeline: Pipeline, spec: ComputationSpec, counts: dict[str, int],
                   bootstrap: str, kafka: dict) -> None:  # fmt: skip
    """Records the group has not read in a topic the rescale recreates empty refuse it."""
    names = [t for t in emptied(pipeline, spec) if t in counts]
    ends = ends_of(bootstrap, kafka, spec, names, counts)
    committed = committed_of(bootstrap, kafka, spec, list(ends))
    for (topic, p), (low, end) in ends.items():
        if max(low, committed.get((topic, p), low)) < end:
            raise PipelineError(
                f"{topic}[{p}] holds records {spec.group} has not read yet: run it until it "
                f"has read them (logwheel status shows its lag), stop it, then rescale"
            )


def _stage(spec: ComputationSpec, partitions: int, counts: dict[str, int], bootstrap: str,
           kafka: dict, spark: Any, dry_run: bool, say: Callable[[str], None]) -> dict:  # fmt: skip
    """Step 1: write the staging topics and verify them; the switch's marker record."""
    old, staging = topics_of(spec), topics_of(spec, staging=True)
    current = counts[spec.changelog]
    present = [t for t in old.all() if t in counts]
    ends = ends_of(bootstrap, kafka, spec, present, counts)
    streams = [i.stream for i in spec.inputs if i.key is not None]
    wanted = [tp for tp in ends if tp[0] in old.by_key.values()]
    wanted += [(s, p) for s in streams for p in range(counts.get(s, 0))]
    committed = committed_of(bootstrap, kafka, spec, wanted)
    offsets: Offsets = {}
    for (topic, p), (low, end) in ends.items():
        start = max(low, committed.get((topic, p), low)) if topic in old.by_key.values() else low
        offsets.setdefault(topic, {})[p] = (start, end)
    pending = sum(e - s for t in old.by_key.values() for s, e in offsets.get(t, {}).values())
    sources = [[s, p, committed[(s, p)]] for s in streams for p in range(counts.get(s, 0))
               if (s, p) in committed]  # fmt: skip
    say(f"rescale {spec.group}: {current} -> {partitions} partitions: {', '.join(present)}")
    say(f"rescale {spec.group}: up to {pending} records pending in its .by-key topics; the "
        f"sources {', '.join(streams) or '(none)'} keep their partitions and offsets")  # fmt: skip
    if dry_run:
        say(f"would: stage into {', '.join(staging.all())}, verify, switch, rebuild "
            f"{spec.watermarks} and set {spec.group}'s offsets")  # fmt: skip
        return {}
    started = time.monotonic()
    recreate(bootstrap, kafka, _staging_specs(spec, staging, partitions))
    frame = view(spark, old, offsets, bootstrap, kafka)
    _copy(spec, frame, staging, partitions, "stage", bootstrap, kafka, spark, say,
          "the staging topics do not match the old ones (above); nothing was switched, the old "
          "topics are as they were: run the rescale again")  # fmt: skip
    refuse_live_members(AdminClient(client_config(bootstrap, kafka)), spec, then="rescale")
    if ends_of(bootstrap, kafka, spec, present, counts) != ends:
        raise PipelineError(
            f"rescale {spec.group}: its topics changed while it was staged (was it run?); "
            "nothing was switched: stop it and run the rescale again"
        )
    say(f"rescale {spec.group}: staged and verified in {time.monotonic() - started:.1f} s")
    return {"status": "switching", "partitions": partitions, "from": current, "sources": sources}


def _copy(spec: ComputationSpec, frame: Any | None, targets: Topics, partitions: int,
          step: str, bootstrap: str, kafka: dict, spark: Any, say: Callable[[str], None],
          failed: str) -> dict[tuple[str, int], int]:  # fmt: skip
    """Write `frame` to `targets` and verify them against it, key by key (PipelineError with
    `failed` if they differ); the last offset written per target partition."""
    last: dict[tuple[str, int], int] = {}
    if frame is not None:
        prefix = f"{spec.group}.rescale.{step}"
        last = write_view(frame, targets, partitions, bootstrap, kafka, prefix,
                          _tasks(spark)).last  # fmt: skip
    copied = view(spark, targets, _all_of(bootstrap, kafka, spec, targets, partitions),
                  bootstrap, kafka)  # fmt: skip
    checked = verify(frame, copied, partitions, spark)
    what = "old -> staging" if step == "stage" else "staging -> new"
    for line in checked.lines(what):
        say(line)
    if not checked.ok:
        raise PipelineError(f"rescale {spec.group}: {failed}")
    return last


def _staging_specs(spec: ComputationSpec, staging: Topics, partitions: int) -> list[TopicSpec]:
    journals = [staging.changelog, staging.timers, *([staging.ids] if staging.ids else [])]
    specs = [TopicSpec(t, partitions, dict(COMPACT), "rescale", True) for t in journals]
    specs += [TopicSpec(t, partitions, dict(DELETE), "rescale", True)
              for t in staging.by_key.values()]  # fmt: skip
    return specs


def _tasks(spark: Any) -> int:
    return max(1, spark.sparkContext.defaultParallelism)


def _all_of(bootstrap: str, kafka: dict, spec: ComputationSpec, topics: Topics,
            partitions: int) -> Offsets:  # fmt: skip
    counts = {t: partitions for t in topics.all()}
    ends = ends_of(bootstrap, kafka, spec, topics.all(), counts)
    return ranges_of((t, p, low, end) for (t, p), (low, end) in ends.items())


def _write_marker(spec: ComputationSpec, marker: dict, bootstrap: str, kafka: dict) -> None:
    producer = Producer(producer_config(bootstrap, extra=kafka))
    producer.produce(marker_topic(spec), json.dumps(marker).encode(), MARKER_KEY, partition=0)
    if producer.flush(30):
        raise PipelineError(f"could not write to {marker_topic(spec)}: is the broker reachable?")


def _switch(pipeline: Pipeline, spec: ComputationSpec, marker: dict, bootstrap: str,
            kafka: dict, spark: Any, say: Callable[[str], None],
            on_step: Callable[[str], None]) -> None:  # fmt: skip
    """Steps 2 and 3: replace the old topics by copies of the staging ones, then finish."""
    partitions = marker["partitions"]
    old, staging = topics_of(spec), topics_of(spec, staging=True)
    started = time.monotonic()
    admin = AdminClient(client_config(bootstrap, kafka))
    delete_topics(admin, [*old.all(), *emptied(pipeline, spec)])
    on_step("deleted")
    rescaled = replace(spec, partitions=partitions)
    new_pipeline = pipeline.redeclared(rescaled)
    create_topics(bootstrap, new_pipeline, client_config=kafka, part=spec.name)
    staged = view(spark, staging, _all_of(bootstrap, kafka, spec, staging, partitions),
                  bootstrap, kafka)  # fmt: skip
    last = _copy(spec, staged, old, partitions, "copy", bootstrap, kafka, spark, say,
                 "the new topics do not match the staging ones (above): run the rescale again "
                 "(it copies again from the staging topics)")  # fmt: skip
    on_step("copied")
    marks = _finish(spec, marker, last, emptied(pipeline, spec), bootstrap, kafka)
    delete_topics(admin, [*staging.all()])
    say(f"rescale {spec.group}: switched to {partitions} partitions in "
        f"{time.monotonic() - started:.1f} s; {len(marks)} marks rebuilt on {spec.watermarks}; "
        f"run it with partitions={partitions}")  # fmt: skip
    on_step("done")


def _finish(spec: ComputationSpec, marker: dict, last: dict[tuple[str, int], int],
            emptied: list[str], bootstrap: str, kafka: dict) -> list:  # fmt: skip
    """In one transaction: the rebuilt marks, the group's offsets and the marker `done`."""
    partitions = marker["partitions"]
    _, previous = start_watermarks(bootstrap, spec, kafka)
    topics = AdminClient(client_config(bootstrap, kafka)).list_topics(timeout=30).topics
    counts = {t: len(m.partitions) for t, m in topics.items()}
    marks, deleted = rebuilt_marks(spec, marker["from"], partitions, previous, last, counts,
                                   counts)  # fmt: skip
    records = [(spec.watermarks, m.producer.encode(), encode_mark(m)) for m in marks]
    records += [(spec.watermarks, producer_id.encode(), None) for producer_id in deleted]
    done = {**marker, "status": "done"}
    records.append((marker_topic(spec), MARKER_KEY, json.dumps(done).encode()))
    metadata = commit_metadata(f"rescale/{partitions}")
    offsets = [TopicPartition(s, p, o, metadata=metadata) for s, p, o in marker["sources"]]
    offsets += [TopicPartition(t, q, 0, metadata=metadata)
                for t in [*spec.keyed_topics, *emptied] for q in range(partitions)]  # fmt: skip
    commit_with_offsets(bootstrap, kafka, f"{spec.group}.rescale.finish", spec.group, records,
                        offsets)  # fmt: skip
    return marks
