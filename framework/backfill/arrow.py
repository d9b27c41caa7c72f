"""The backfill's Python side on Arrow (`mapInArrow`): Spark hands each task its rows as Arrow
record batches instead of pickled rows, and takes Arrow batches back.

Two steps run here: routing (records a key extractor re-keys are decoded on the workers before
the shuffle, a batch at a time) and the task itself (`task.run_task` over the batch's rows,
one completion record back). Columns become Python lists once per batch (`to_pylist` in
C++), not once per value; columns passed through untouched never leave Arrow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from framework.backfill.task import COLUMNS, RECORD_CONSTANTS, TaskSettings, route, run_task
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.kafka.registry_settings import RegistrySettings

ROUTED = ("r_key", "stage", "error_type", "error")
"""What routing adds to each record: its key, or where and why it is a dead letter."""


def rows(batches: Iterator[Any]) -> Iterator[tuple]:
    """The batches' rows as tuples (headers as (key, value) pairs, as Kafka gives them)."""
    for batch in batches:
        yield from zip(*_columns(batch), strict=True)


def task_rows(batches: Iterator[Any]) -> Iterator[tuple]:
    """The batches' rows in `task.COLUMNS` order, the columns a frame left out
    (`RECORD_CONSTANTS`) put back."""
    for batch in batches:
        given, n = dict(zip(batch.schema.names, _columns(batch), strict=True)), batch.num_rows
        columns = [given[c] if c in given else [RECORD_CONSTANTS[c]] * n for c in COLUMNS]
        yield from zip(*columns, strict=True)


def _columns(batch: Any) -> list[list]:
    columns = [_values(column) for column in batch.columns]
    if "headers" in batch.schema.names:
        at = batch.schema.names.index("headers")
        columns[at] = [_pairs(hs) for hs in columns[at]]
    return columns


def _values(column: Any) -> list:
    """A column's values; a string column holding bytes that are not UTF-8 (a Kafka key cast
    to a string) with them replaced, as a pickled row carries them: the task dead-letters
    such a record by its raw key anyway."""
    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        import pyarrow as pa

        raw = column.cast(pa.binary()).to_pylist()
        return [None if v is None else v.decode("utf-8", "replace") for v in raw]


def _pairs(headers: list[dict] | None) -> list[tuple] | None:
    return [(h["key"], h["value"]) for h in headers] if headers else headers


def task(settings: TaskSettings, batches: Iterator[Any]) -> Iterator[Any]:
    """One Spark task of the plan over its Arrow batches; one row back: its completion."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    result = run_task(settings, context.partitionId(), task_rows(batches))
    yield pa.RecordBatch.from_pydict({"result": [result]})


def routed(
    pipeline: Pipeline, registry: RegistrySettings | None, spec: ComputationSpec,
    batches: Iterator[Any],
) -> Iterator[Any]:  # fmt: skip
    """Each batch of raw records (topic, partition, offset, key, value, ts, headers first)
    with `ROUTED` appended: the streaming re-keying task's rule (`task.route`) per record."""
    import pyarrow as pa

    for batch in batches:
        found = [
            route(pipeline, registry, spec, *row[:7]) for row in rows([batch.select(range(7))])
        ]
        added = [pa.array([f[i] for f in found], pa.string()) for i in range(len(ROUTED))]
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, *added], names=[*batch.schema.names, *ROUTED]
        )
