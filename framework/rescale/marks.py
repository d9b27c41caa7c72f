"""The rescaled computation's watermark channel, rebuilt from its old marks (pure).

Its keyed tasks' marks (`<computation>/task/<p>`) say what downstream may assume about its
outputs, and each task resumes its hooks' input watermark from its own mark. A new partition
holds keys of every old one, so each new task's mark is the minimum of the old ones (watermark
and input watermark) and names, for every output partition, the highest offset any old task
had written: no new partition's watermark is above the old minimum, so none of its keys'
pending timers or records is overtaken. Marks of old tasks beyond the new count are deleted
(tombstones); if any old task had published none, no task mark is written (the new tasks
publish theirs as they start, and downstream waits for them as for a new computation).

The re-keying tasks' marks (`<computation>/by-key/<stream>/<r>`, one per partition of the
source stream, a count the rescale does not change) keep their watermarks; their offsets in
the `.by-key` topic are replaced by the last offset the rescale wrote to each new partition,
so a new task applies them only once it has read the pending records moved there.
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.core.api import MIN_TIME
from framework.core.pipeline import ComputationSpec
from framework.core.watermarks import Mark, naming_all, repartition_producer, task_producer


def rebuilt_marks(
    spec: ComputationSpec,
    old_partitions: int,
    partitions: int,
    marks: Mapping[str, Mark],
    by_key_last: Mapping[tuple[str, int], int],
    output_counts: Mapping[str, int],
    stream_counts: Mapping[str, int],
) -> tuple[list[Mark], list[str]]:
    """The marks to publish and the producers whose marks to delete. `marks`: the channel's
    latest mark by producer; `by_key_last`: the last offset written per new `.by-key`
    partition; `output_counts`, `stream_counts`: partition counts of outputs and of re-keyed
    input streams."""
    old = [marks.get(task_producer(spec.name, p)) for p in range(old_partitions)]
    publish: list[Mark] = []
    delete = [task_producer(spec.name, p) for p in range(partitions, old_partitions)]
    if old and all(m is not None for m in old):
        known = [m for m in old if m is not None]
        offsets: dict[tuple[str, int], int] = {}
        for mark in known:
            for tp, offset in mark.offsets.items():
                offsets[tp] = max(offset, offsets.get(tp, -1))
        offsets = naming_all(offsets, spec.outputs, output_counts)
        low = min(m.watermark for m in known)
        low_input = min(m.input_watermark for m in known)
        for q in range(partitions):
            publish.append(Mark(task_producer(spec.name, q), low, False, offsets, low_input))
    else:
        delete = [task_producer(spec.name, p) for p in range(max(old_partitions, partitions))]
    for i in spec.inputs:
        if i.key is None:
            continue
        topic = spec.by_key(i.stream)
        for r in range(stream_counts.get(i.stream, 0)):
            mark = marks.get(repartition_producer(spec.name, i.stream, r))
            if mark is None:
                continue
            offsets = {tp: o for tp, o in mark.offsets.items() if tp[0] != topic}
            for q in range(partitions):
                offsets[(topic, q)] = by_key_last.get((topic, q), -1)
            publish.append(
                Mark(
                    mark.producer,
                    mark.watermark,
                    mark.idle,
                    offsets,
                    mark.input_watermark,
                    mark.read,
                )  # fmt: skip
            )
    return publish, delete


def lowest(marks: list[Mark]) -> int:
    """The lowest watermark among `marks` (MIN_TIME if none): what the verification prints."""
    return min((m.watermark for m in marks), default=MIN_TIME)
