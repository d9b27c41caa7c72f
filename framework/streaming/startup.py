"""What a `logwheel run` process settles before it joins its group: one process per state
directory, an instance id that outlives restarts, and topics shaped as the pipeline needs."""

from __future__ import annotations

import fcntl
import uuid
from pathlib import Path
from typing import IO

from confluent_kafka.admin import AdminClient

from framework.core.pipeline import ComputationSpec, PipelineError
from framework.kafka.config import client_config
from framework.private_files import private_dir, write_private


def lock_state_dir(directory: Path) -> IO:
    """Hold `directory` for this process's life; a second `logwheel run` on it is refused."""
    private_dir(directory)  # RocksDB stores and the instance id: the owner's alone
    lock = open(directory / "lock", "a+")  # noqa: SIM115 - held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise PipelineError(
            f"state dir {directory} is in use by another `logwheel run`: "
            "give each instance its own --state-dir"
        ) from None
    return lock


def instance_id(directory: Path, given: str | None) -> str:
    """`given` if any (an orchestrator's stable pod name), else one kept in the state dir:
    stable across restarts, so a restarted process keeps its partitions (static membership)
    and its transactional id aborts what its killed predecessor left open."""
    if given:
        return given
    path = directory / "instance-id"
    if not path.exists():
        write_private(path, uuid.uuid4().hex[:12])
    return path.read_text().strip()


def partition_counts(bootstrap: str, kafka: dict, spec: ComputationSpec) -> dict[str, int]:
    """Every topic's partition count; a configuration error naming the fix where a table or
    an input read by its Kafka key is not co-partitioned with the computation's key space."""
    admin = AdminClient(client_config(bootstrap, kafka))
    topics = admin.list_topics(timeout=30).topics
    counts = {name: len(meta.partitions) for name, meta in topics.items()}
    for name, topic in spec.tables.items():
        if counts.get(topic) != spec.partitions:
            raise PipelineError(
                f"{spec.group} joins table {name!r} ({topic}), which must have "
                f"{spec.partitions} partitions like its key space but has "
                f"{counts.get(topic, 'none (it does not exist)')}: co-partition them "
                "(same partition count and keys) or create the topic"
            )
    for i in spec.inputs:
        if i.key is None and counts.get(i.stream) != spec.partitions:
            raise PipelineError(
                f"{spec.group} reads {i.stream!r} by its Kafka key, so it needs "
                f"{spec.partitions} partitions like its state but it has "
                f"{counts.get(i.stream)}: give the input key_by(...) or recreate the topic"
            )
    return counts
