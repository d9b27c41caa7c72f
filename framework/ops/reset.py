"""`logwheel reset`: reprocess history by moving a computation's consumer-group offsets.

As with Kafka Streams' reset tool, the computation's inputs move to the chosen point and its
repartition (`.by-key`) topics to their end, since their old contents would otherwise be read
a second time.

Event time starts again either way: the computation's own marks on its watermark channel are
deleted (tombstones), so its tasks resume with no input watermark and the replayed records are
not late. Without `--wipe-state` its state and pending timers are kept: the replay runs on top
of them (what a bug fix in output formatting wants). `--wipe-state` also empties its changelog,
timer journal and watermark channel (deleted and created again: compacted topics cannot be
truncated) and the local state under `--state-dir`; a local store elsewhere notices the new
topics at its next start and restores from them instead of bringing old state back.
Downstream computations keep their own event time: replayed outputs reaching them are late
unless they are reset too.

Dead letters sent back by `logwheel dlq replay` that wait in `<computation>.replay` are skipped
(its offsets move to its end, as a `.by-key` topic's): reprocessing the inputs from the chosen
point runs their originals again with the current code. The dead-letter topic and the record of
what was replayed (`.replayed`) are kept, even with `--wipe-state`: they tell what failed and
what was sent back, not the state.
"""

from __future__ import annotations

import shutil
import time
from contextlib import nullcontext
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.part import reader_group
from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.core.watermarks import repartition_producer, task_producer
from framework.kafka.config import client_config, consumer_config, producer_config
from framework.kafka.groups import refuse_live_members
from framework.kafka.topic_ends import offset_at, parse_point
from framework.kafka.topics import create_topics
from framework.streaming.state_dir import lock_state_dir


def reset(
    pipeline: Pipeline,
    computation: str,
    to: str,
    *,
    bootstrap: str,
    state_dir: Path,
    wipe_state: bool = False,
    dry_run: bool = False,
    kafka: dict | None = None,
) -> list[str]:
    """Carry out (or with `dry_run` only describe) the reset; returns what it does, a line each."""
    spec = pipeline[computation]
    point = parse_point(to)
    local = Path(state_dir) / pipeline.name / spec.name
    # Hold the state dir as `logwheel run` does: no local run may use it while it is wiped.
    wiping = wipe_state and not dry_run and local.is_dir()
    with lock_state_dir(local) if wiping else nullcontext():
        return _reset(pipeline, spec, point, bootstrap, local, wipe_state, dry_run, kafka)


def _reset(
    pipeline: Pipeline,
    spec: ComputationSpec,
    point: str | int,
    bootstrap: str,
    local: Path,
    wipe_state: bool,
    dry_run: bool,
    kafka: dict | None,
) -> list[str]:
    admin = AdminClient(client_config(bootstrap, kafka))
    refuse_live_members(admin, spec)
    consumer = Consumer(consumer_config(bootstrap, reader=spec.group, extra=kafka))
    try:
        offsets = _plan(consumer, spec, point)
        plan = [f"{tp.topic}[{tp.partition}] -> offset {tp.offset}" for tp in offsets]
        if wipe_state:
            plan += [f"empty {t}" for t in (*spec.journals.values(), spec.watermarks)]
            plan.append(f"remove local state {local}")
        else:
            plan.append(f"forget {spec.name}'s event time: its marks on {spec.watermarks}")
        if dry_run:
            return plan
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    if wipe_state:
        _recreate(admin, pipeline, spec, bootstrap, kafka)
        _remove_local_state(local)
    else:
        _forget_marks(pipeline, spec, bootstrap, kafka)
    return plan


def _forget_marks(
    pipeline: Pipeline, spec: ComputationSpec, bootstrap: str, kafka: dict | None
) -> None:
    """Tombstones for every mark the computation's tasks publish (re-keying and keyed)."""
    consumer = Consumer(consumer_config(bootstrap, reader=reader_group(spec.group), extra=kafka))
    try:
        topics = consumer.list_topics(timeout=30).topics
    finally:
        consumer.close()
    producers = [task_producer(spec.name, p) for p in range(spec.partitions)]
    for i in spec.inputs:
        if i.key is not None and i.stream in topics:
            count = len(topics[i.stream].partitions)
            producers += [repartition_producer(spec.name, i.stream, p) for p in range(count)]
    producer = Producer(producer_config(bootstrap, extra=kafka))
    for name in producers:
        producer.produce(spec.watermarks, None, name.encode(), partition=0)
    if producer.flush(30):
        raise PipelineError(f"could not write to {spec.watermarks}: is the broker reachable?")


def _plan(consumer: Consumer, spec: ComputationSpec, point: str | int) -> list[TopicPartition]:
    metadata = consumer.list_topics(timeout=30).topics
    offsets = []
    for i in spec.inputs:
        moves = [(i.stream, point)] + ([(spec.by_key(i.stream), "latest")] if i.key else [])
        for topic, where in moves:
            if topic not in metadata:
                continue
            for p in sorted(metadata[topic].partitions):
                tp = TopicPartition(topic, p)
                low, high = consumer.get_watermark_offsets(tp, 30)
                offsets.append(TopicPartition(topic, p, offset_at(consumer, tp, where, low, high)))
    if spec.replay in metadata:  # replays still waiting: their originals are reprocessed
        for p in sorted(metadata[spec.replay].partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(spec.replay, p), 30)
            offsets.append(TopicPartition(spec.replay, p, high))
    return offsets


def _remove_local_state(local: Path) -> None:
    """The state dir: its contents, then (still holding it) its lock file and itself. An error
    is raised, never swallowed: a half-removed store must not be reported as reset."""
    if not local.is_dir():
        return
    lock = local / "lock"
    for entry in [*(e for e in local.iterdir() if e != lock), lock, local]:
        try:
            if entry == local:
                local.rmdir()
            elif entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
        except OSError as error:
            raise PipelineError(
                f"cannot remove local state {entry}: {error}; remove {local} by hand "
                "before the next `logwheel run` on it"
            ) from None


def _recreate(
    admin: AdminClient,
    pipeline: Pipeline,
    spec: ComputationSpec,
    bootstrap: str,
    kafka: dict | None,
) -> None:
    topics = [*spec.journals.values(), spec.watermarks]
    existing = set(admin.list_topics(timeout=30).topics)
    doomed = [t for t in topics if t in existing]
    for future in admin.delete_topics(doomed, operation_timeout=30).values():
        future.result()
    deadline = time.monotonic() + 60
    while set(doomed) & set(admin.list_topics(timeout=30).topics):
        if time.monotonic() > deadline:
            raise PipelineError(f"topics {doomed} were not deleted within 60 s")
        time.sleep(0.2)
    create_topics(bootstrap, pipeline, client_config=kafka, part=spec.name)
