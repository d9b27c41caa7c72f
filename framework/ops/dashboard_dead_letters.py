"""Dead letters of every computation and sink of a pipeline, counted by stage, for
`logwheel ui`.

STAND-IN (issue 42) for the `replay` branch's
`framework.ops.dead_letter_counts.dead_letters_by_stage`, which has this signature and
answer: once that branch is merged, framework/ops/dashboard.py imports it from there instead
and this module goes."""

from __future__ import annotations

from collections import Counter

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.pipeline import Pipeline
from framework.kafka.config import client_config, consumer_config, reader_group
from framework.kafka.topic_ends import Ends, read_to_end

STAGE_HEADER = "logwheel.error.stage"


def dead_letters_by_stage(
    pipeline: Pipeline, bootstrap: str, kafka: dict | None = None
) -> dict[str, dict[str, int]]:
    """For every computation and sink of `pipeline`: its dead letters by stage, read to the
    end of `<pipeline>.<name>.dlq` (committed records only; `{}`: none, or no topic yet)."""
    names = [*pipeline.computations, *(getattr(pipeline, "sinks", None) or {})]
    existing = AdminClient(client_config(bootstrap, kafka)).list_topics(timeout=30).topics
    consumer = Consumer(consumer_config(bootstrap, reader=reader_group(pipeline.name), extra=kafka))
    try:
        return {name: _count(consumer, f"{pipeline.name}.{name}.dlq", existing) for name in names}
    finally:
        consumer.close()


def _count(consumer: Consumer, topic: str, existing: dict) -> dict[str, int]:
    if topic not in existing:
        return {}
    counts: Counter[str] = Counter()
    tps = [(topic, p) for p in sorted(existing[topic].partitions)]
    ends = Ends(consumer)
    ends.add(tps)
    consumer.assign([TopicPartition(t, p, 0) for t, p in tps])

    def count(msgs: list) -> None:
        for msg in msgs:
            if msg.topic() != topic:  # one left from the topic read before
                continue
            stage = dict(msg.headers() or ()).get(STAGE_HEADER)
            counts[stage.decode(errors="replace") if stage else "unknown"] += 1

    try:
        read_to_end(ends, count, timeout=30)
    finally:
        consumer.unassign()
    return dict(sorted(counts.items()))
