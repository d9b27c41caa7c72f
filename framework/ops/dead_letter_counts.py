"""Dead letters of a topic, counted by stage, for `logwheel ui`.

STAND-IN (issue 42): `logwheel dlq ls` (branch `replay`) counts dead letters by stage too.
When it is merged, `count_by_stage` below is replaced by a call to its function, and this
module goes; nothing else of the dashboard changes (framework/ops/dashboard.py calls only
`count_by_stage`)."""

from __future__ import annotations

from collections import Counter

from confluent_kafka import Consumer, TopicPartition

from framework.kafka.config import consumer_config, reader_group
from framework.kafka.topic_ends import Ends, read_to_end

STAGE_HEADER = "logwheel.error.stage"


def count_by_stage(
    bootstrap: str, pipeline: str, topic: str, partitions: int, kafka: dict | None = None
) -> dict[str, int]:
    """How many dead letters `topic` (of `partitions` partitions) holds per stage, read to its
    end (committed records only)."""
    consumer = Consumer(consumer_config(bootstrap, reader=reader_group(pipeline), extra=kafka))
    counts: Counter[str] = Counter()
    try:
        tps = [(topic, p) for p in range(partitions)]
        ends = Ends(consumer)
        ends.add(tps)
        consumer.assign([TopicPartition(t, p, 0) for t, p in tps])

        def count(msgs: list) -> None:
            for msg in msgs:
                stage = dict(msg.headers() or ()).get(STAGE_HEADER)
                counts[stage.decode(errors="replace") if stage else "unknown"] += 1

        read_to_end(ends, count, timeout=30)
    finally:
        consumer.close()
    return dict(sorted(counts.items()))
