"""The Arrow batches a backfill task reads, as the rows the task runs: one tuple a record,
headers as (key, value) pairs, a Kafka key that is not UTF-8 read as the row path reads it."""

from __future__ import annotations

import pyarrow as pa

from framework.backfill.arrow import rows, task_rows
from framework.backfill.task import COLUMNS, RECORD, RECORD_CONSTANTS

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batch(keys: list, headers: list) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()).cast(pa.string(), safe=False),
         pa.array([1, 2][: len(keys)], pa.int64()), pa.array(headers, HEADERS)],
        names=["key", "ts", "headers"],
    )  # fmt: skip


def test_each_record_of_each_batch_is_a_tuple_with_its_headers_as_pairs():
    first = batch([b"a", b"b"], [None, [{"key": "h", "value": b"v"}]])
    second = batch([b"c"], [[]])
    assert list(rows(iter([first, second]))) == [
        ("a", 1, None),
        ("b", 2, [("h", b"v")]),
        ("c", 1, []),
    ]


def test_a_key_that_is_not_utf8_is_read_with_replacement_characters():
    assert [r[0] for r in rows(iter([batch([b"ok", b"\xff\xfe"], [None, None])]))] == [
        "ok",
        "\ufffd\ufffd",
    ]


def test_a_task_reads_its_rows_in_column_order_with_the_columns_left_out_put_back():
    """A frame of records read by their Kafka key leaves out what every row shares
    (`RECORD_CONSTANTS`); the task's rows are the same as from a frame that sent them."""
    values = {"kind": RECORD, "key": "a", "ts": 1, "topic": "t", "partition": 0, "offset": 5,
              "kafka_key": b"a", "value": b"v", "headers": [], "stream": "t", "keyed": True,
              "stage": None, "error_type": None, "error": None}  # fmt: skip
    whole = pa.RecordBatch.from_pylist([values])
    varying = [c for c in reversed(COLUMNS) if c not in RECORD_CONSTANTS]
    narrow = pa.RecordBatch.from_pylist([{c: values[c] for c in varying}])
    expected = [tuple(values[c] for c in COLUMNS)]
    assert list(task_rows(iter([whole]))) == list(task_rows(iter([narrow]))) == expected
