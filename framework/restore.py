"""Rebuilding a task's local store from its changelog and timer journal (invariant 2)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from framework.pipeline import ComputationSpec
from framework.state import TaskStore

log = logging.getLogger(__name__)
_BATCH = 5_000


def restore(consumer: Consumer, spec: ComputationSpec, partition: int, store: TaskStore) -> int:
    """Read the task's journals from the local checkpoint (else the start) to their end into
    the store; returns how many records were applied."""
    checkpoint = store.checkpoint()
    journals = {spec.changelog: "changelog", spec.timers: "timers"}
    consumer.assign(
        [
            TopicPartition(topic, partition, checkpoint.get(name, OFFSET_BEGINNING))
            for topic, name in journals.items()
        ]
    )
    started, applied, pending = time.monotonic(), 0, set(journals)
    reported = started
    try:
        while pending:
            states, timers, offsets = [], [], {}
            for msg in consumer.consume(_BATCH, 0.05):  # returns at the timeout, batch or not
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.topic())
                        continue
                    raise KafkaException(err)
                change = (msg.key(), msg.value())
                (states if msg.topic() == spec.changelog else timers).append(change)
                offsets[journals[msg.topic()]] = msg.offset() + 1
            if offsets:
                store.apply(states, timers, offsets)
                applied += len(states) + len(timers)
            if time.monotonic() - reported > 5:
                reported = time.monotonic()
                log.info("%s task %d: restoring, %d records so far", spec.group, partition, applied)
    finally:
        consumer.unassign()
    if applied:
        log.info(
            "%s task %d: restored %d journal records in %.1fs",
            spec.group,
            partition,
            applied,
            time.monotonic() - started,
        )
    return applied
