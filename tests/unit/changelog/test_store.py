"""Where a `ChangelogTable` keeps its rows (changelog/store.py), in memory and in RocksDB alike:
each change reported as (key, old, new), a tombstone removing its key, a batch that cannot be
decoded changing nothing (the table reads it again), and RocksDB's rows and read positions
surviving a reopen together."""

from __future__ import annotations

import json

import pytest

from changelog.store import MemoryRows, RocksRows
from framework.errors import Retry


def decode(raw: bytes):
    if raw == b"away":  # a wire-format value while its registry does not answer
        raise Retry("registry away")
    return json.loads(raw)


@pytest.fixture(params=["memory", "rocksdb"])
def rows(request, tmp_path):
    made = MemoryRows(decode) if request.param == "memory" else RocksRows(tmp_path / "t", decode)
    yield made
    made.close()


def test_each_change_is_reported_with_the_value_it_replaces(rows):
    first = rows.apply([("ann", b"1"), ("bob", b"2")], {0: 2})
    assert first == [("ann", None, 1), ("bob", None, 2)]
    changes = [("ann", b"3"), ("bob", None), ("ann", b"4"), ("cyd", None)]
    assert rows.apply(changes, {0: 6}) == [
        ("ann", 1, 3), ("bob", 2, None), ("ann", 3, 4), ("cyd", None, None),
    ]  # fmt: skip
    assert (rows.get("ann"), rows.get("bob"), len(rows)) == (4, None, 1)
    assert dict(rows.items()) == {"ann": 4}
    assert rows.positions == {0: 6}


def test_a_batch_with_a_value_that_cannot_be_decoded_changes_nothing(rows):
    rows.apply([("ann", b"1")], {0: 1, 1: 0})
    with pytest.raises(Retry):
        rows.apply([("ann", b"2"), ("bob", b"away")], {0: 3})
    assert (rows.get("ann"), rows.get("bob"), len(rows)) == (1, None, 1)
    assert rows.positions == {0: 1, 1: 0}


def test_rocksdb_rows_reopen_with_their_positions_so_only_the_tail_is_read(tmp_path):
    rows = RocksRows(tmp_path / "t", decode)
    rows.apply([("ann", b'{"n": 1}'), ("", b"0")], {0: 5, 3: 2})
    rows.apply([("bob", b"[2]")], {1: 1})
    rows.close()
    again = RocksRows(tmp_path / "t", decode)
    try:
        assert again.positions == {0: 5, 1: 1, 3: 2}
        assert list(again.items()) == [("", 0), ("ann", {"n": 1}), ("bob", [2])]  # never positions
        assert len(again) == 3
    finally:
        again.close()
