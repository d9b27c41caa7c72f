"""The backfill plan as stored on the computation's `.backfill` topic: written before any task
runs, read back with the tasks' completion records, and, when a backfill finds it unfinished,
checked against the computation and its topics as they are before the backfill finishes it.

`Plan.from_json` checks that a plan is well formed; this checks that it is this computation's:
its name; exactly the topics its backfill reads (`plan.input_topics`), each with every
partition it has now and offsets no further than its end; its journals' ends for exactly its
key-space partitions, within theirs; and no more tasks than it has rows to give them. Whoever
may write the `.backfill` topic could otherwise have a backfill read another topic as this
computation's input and commit its offsets to this group, or open a million transactions and
write a million tombstones; and a plan made before the pipeline changed would mix the old and
the new. Each is refused in one line saying what differs and what to do. A finished plan is
not read for anything (the next backfill makes a new one), so it is not checked.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from framework.backfill.plan import PLAN_KEY, Plan, PlanError, backfill_topic, input_topics
from framework.core.part import reader_group
from framework.core.pipeline import ComputationSpec, PipelineError
from framework.kafka.config import consumer_config, producer_config
from framework.kafka.topic_ends import read_compacted

Ends = Callable[[str], list[int] | None]
"""A topic's end offsets now, one per partition (None: no such topic)."""


def read_backfill_topic(bootstrap: str, topic: str, kafka: dict | None = None) -> dict[str, bytes]:
    """The latest value per key of the backfill topic (read_committed), tombstones removed."""
    # the topic is `<group>.backfill` (backfill_topic): read as the group's readers are
    return read_compacted(bootstrap, topic, reader_group(topic.removesuffix(".backfill")), kafka)


def write_plan(bootstrap: str, spec: ComputationSpec, plan: Plan, kafka: dict | None) -> None:
    """Store `plan` as the computation's plan, before any of its tasks runs."""
    producer = Producer(producer_config(bootstrap, extra=kafka))
    producer.produce(backfill_topic(spec), plan.to_json(), PLAN_KEY.encode(), partition=0)
    if producer.flush(30):
        raise PipelineError(f"could not write the plan to {backfill_topic(spec)}")


def check_stored(plan: Plan, spec: ComputationSpec, bootstrap: str, kafka: dict | None) -> None:
    """Refuse (PlanError) an unfinished stored plan that is not `spec`'s as its topics are now."""
    consumer = Consumer(consumer_config(bootstrap, reader=spec.group, extra=kafka))
    try:
        metadata = consumer.list_topics(timeout=30).topics

        def ends(topic: str) -> list[int] | None:
            if topic not in metadata or metadata[topic].error is not None:
                return None
            return [
                consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
                for p in range(len(metadata[topic].partitions))
            ]

        refuse_foreign(plan, spec, ends)
    finally:
        consumer.close()


def refuse_foreign(plan: Plan, spec: ComputationSpec, ends: Ends) -> None:
    """PlanError naming the first way `plan` is not `spec`'s, with `ends` the topics' ends."""
    difference = _difference(plan, spec, ends)
    if difference is not None:
        topic = backfill_topic(spec)
        raise PlanError(
            f"the unfinished backfill plan {plan.id} stored on {topic} {difference}, so it is "
            f"not {spec.group}'s as it is now: finish it with the pipeline it was made for, "
            f"or delete the topic {topic} to plan the backfill afresh"
        )


def _difference(plan: Plan, spec: ComputationSpec, ends: Ends) -> str | None:
    if plan.computation != spec.name:
        return f"is computation {plan.computation!r}'s"
    wanted = input_topics(spec)
    named: dict[str, list[int]] = {topic: [] for topic in wanted}
    for r in plan.ranges:
        if r.topic not in wanted:
            return f"reads topic {r.topic!r}, which is none of {sorted(wanted)}"
        if (r.stream, r.keyed) != wanted[r.topic]:
            return f"reads {r.topic!r} as {'keyed ' * r.keyed}input {r.stream!r}"
        named[r.topic].append(r.partition)
    topic_ends = {topic: ends(topic) for topic in wanted}
    for topic, partitions in named.items():
        have = topic_ends[topic]
        if have is None or sorted(partitions) != list(range(len(have))):
            count = "does not exist" if have is None else f"has {len(have)} partitions"
            return f"reads partitions {sorted(partitions)} of {topic!r}, which {count}"
    for r in plan.ranges:
        if r.end > topic_ends[r.topic][r.partition]:
            return f"reads {r.topic}/{r.partition} to offset {r.end}, past its end"
    journals = [("changelog_end", plan.changelog_end, spec.changelog),
                ("timers_end", plan.timers_end, spec.timers),
                ("ids_end", plan.ids_end, spec.ids if spec.dedup else None)]  # fmt: skip
    key_space = list(range(spec.partitions))
    if sorted(plan.start_watermarks) != key_space:
        return f"has start_watermarks of partitions {sorted(plan.start_watermarks)}"
    for name, table, journal in journals:
        if sorted(table) != (key_space if journal else []):
            return f"has {name} of partitions {sorted(table)}"
        have = ends(journal) if table and journal else []
        if table and (have is None or len(have) != spec.partitions):
            return f"has {name}, and {journal!r} has not {spec.partitions} partitions"
        if any(end > have[p] for p, end in table.items()):
            return f"has {name} past the end of {journal!r}"
    if plan.tasks > plan.most_tasks():
        return f"splits into {plan.tasks} tasks, more than its {plan.most_tasks()} rows"
    return None
