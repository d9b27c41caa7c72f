"""Where a computation's topics stand, for `logwheel rescale`: each partition's first and
read_committed end offsets (an open transaction refuses the rescale), the group's committed
offsets, and deleting topics until the cluster no longer lists them."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.part import reader_group
from framework.core.pipeline import ComputationSpec, PipelineError
from framework.kafka.config import client_config, consumer_config
from framework.kafka.topics import TopicSpec, ensure_topics

MARKERS_S = 15.0
"""How long a partition's last stable offset may stay behind its end before the rescale
takes it for an open transaction."""


def ends_of(bootstrap: str, kafka: dict, spec: ComputationSpec, topics: list[str],
          counts: dict[str, int]) -> dict[tuple[str, int], tuple[int, int]]:  # fmt: skip
    """(low, read_committed end) of every partition of `topics`; an open transaction (the
    last stable offset behind the high watermark) refuses the rescale."""
    committed = Consumer(consumer_config(bootstrap, reader=reader_group(spec.group), extra=kafka))
    uncommitted = Consumer(
        consumer_config(
            bootstrap,
            reader=reader_group(spec.group),
            extra={**kafka, "isolation.level": "read_uncommitted"},
        )  # fmt: skip
    )
    out = {}
    try:
        for topic in topics:
            for p in range(counts.get(topic, 0)):
                tp = TopicPartition(topic, p)
                # a transaction's markers follow its commit by a moment: wait that out
                deadline = time.monotonic() + MARKERS_S
                while True:
                    low, end = committed.get_watermark_offsets(tp, 30)
                    _, high = uncommitted.get_watermark_offsets(tp, 30)
                    if end == high:
                        break
                    if time.monotonic() > deadline:
                        raise PipelineError(
                            f"{topic}[{p}] has an open transaction (a killed instance's): wait "
                            "out its transaction timeout, or run and stop the computation "
                            "once, then rescale"
                        )
                    time.sleep(0.2)
                out[(topic, p)] = (low, end)
    finally:
        committed.close()
        uncommitted.close()
    return out


def committed_of(bootstrap: str, kafka: dict, spec: ComputationSpec,
               tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:  # fmt: skip
    consumer = Consumer(consumer_config(bootstrap, reader=spec.group, extra=kafka))
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def recreate(bootstrap: str, kafka: dict, specs: list[TopicSpec]) -> None:
    """Delete the topics of `specs` that exist, then create them all empty."""
    admin = AdminClient(client_config(bootstrap, kafka))
    delete_topics(admin, [s.name for s in specs])
    ensure_topics(admin, specs)


def delete_topics(admin: AdminClient, names: list[str], timeout: float = 60) -> None:
    """Delete those of `names` that exist and wait until the cluster no longer lists them."""
    doomed = [t for t in names if t in admin.list_topics(timeout=30).topics]
    if not doomed:
        return
    for future in admin.delete_topics(doomed, operation_timeout=30).values():
        future.result()
    deadline = time.monotonic() + timeout
    while set(doomed) & set(admin.list_topics(timeout=30).topics):
        if time.monotonic() > deadline:
            raise PipelineError(f"topics {doomed} were not deleted within {timeout:.0f} s")
        time.sleep(0.2)
