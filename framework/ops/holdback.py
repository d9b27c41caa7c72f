"""Which upstream partition holds a computation's watermark back.

A task's input watermark on a partition is the minimum over the marks of that partition's
producers (framework/core/watermarks.py): the re-keying tasks of every partition of a re-keyed
stream, the tasks of the computations writing a stream, or an injector's processes. The
producer with the lowest (or a still unknown) watermark, while another is ahead, is the one to
look at — `logwheel status` and `logwheel ui` name it."""

from __future__ import annotations

from collections.abc import Mapping

from framework.core.api import MIN_TIME
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.core.watermarks import Mark, Published, partition_watermark, repartition_producer
from framework.ops.topology import stream_id


def upstream(
    pipeline: Pipeline, spec: ComputationSpec, topic: str, partition: int, counts: Mapping[str, int]
) -> tuple[list[str], list[str]]:
    """(watermark channels, producers) whose marks make the input watermark of `spec`'s reader
    of `topic`/`partition`; no producers for a source whose watermark the reader computes
    itself (`BoundedOutOfOrderness`). `counts`: partitions per topic."""
    for i in spec.inputs:
        if i.key is not None and topic == spec.by_key(i.stream):
            producers = [
                repartition_producer(spec.name, i.stream, r) for r in range(counts.get(i.stream, 0))
            ]
            return [spec.watermarks], producers
    watermark, channels = partition_watermark(pipeline, topic, topic, partition)
    producers = watermark.producers if isinstance(watermark, Published) else []
    return channels, producers


def held_back_by(marks: Mapping[str, Mark | None]) -> str | None:
    """The producer holding the minimum back: one not yet heard from (or unknown) while another
    has a watermark, else the lowest of two or more that differ; None when they agree."""
    known = {
        producer: mark.watermark
        for producer, mark in marks.items()
        if mark is not None and not mark.idle and mark.watermark > MIN_TIME
    }
    if not known:
        return None
    unknown = [p for p, m in marks.items() if m is None or (not m.idle and m.watermark <= MIN_TIME)]
    if unknown:
        return unknown[0]
    lowest = min(known, key=known.__getitem__)
    return lowest if known[lowest] < max(known.values()) else None


def describe_producer(pipeline: Pipeline, producer: str) -> dict[str, object]:
    """A producer id of `pipeline` as a place in its graph: `{"node", "partition", "label"}` —
    the stream partition a re-keying task reads, the computation's task, or the injector
    process."""
    parts = producer.split("/")
    if len(parts) >= 4 and parts[1] == "by-key":
        stream, partition = "/".join(parts[2:-1]), int(parts[-1])
        return {
            "node": stream_id(stream),
            "partition": partition,
            "label": f"{stream}[{partition}]",
        }
    if len(parts) == 3 and parts[1] == "task":
        name, partition = parts[0], int(parts[2])
        drawn = [p.node for p in pipeline.parts() if p.name == name]
        return {
            "node": drawn[0] if drawn else None,
            "partition": partition,
            "label": f"{name}[{partition}]",
        }
    if len(parts) == 3 and parts[1] == "injector":
        return {"node": None, "partition": None, "label": f"injector {parts[0]} #{parts[2]}"}
    return {"node": None, "partition": None, "label": producer}
