"""A store's data and its position are written in one RocksDB batch (invariants 1 and 2)."""

from __future__ import annotations

import pytest

from framework.state.rocks import open_raw, read_json, write_with_position


def test_changes_and_their_position_land_together(tmp_path):
    db = open_raw(tmp_path / "db")
    db[b"gone"] = b"x"
    write_with_position(db, [(b"a", b"1"), (b"gone", None)], b"m:pos", {"changelog": 7})
    assert db.get(b"a") == b"1" and db.get(b"gone") is None
    assert read_json(db, b"m:pos") == {"changelog": 7}
    db.close()
    reopened = open_raw(tmp_path / "db")
    assert reopened.get(b"a") == b"1" and read_json(reopened, b"m:pos") == {"changelog": 7}
    reopened.close()


def test_a_change_that_cannot_be_written_writes_no_position_either(tmp_path):
    db = open_raw(tmp_path / "db")
    with pytest.raises(ValueError):
        write_with_position(db, [(b"a", b"1"), (b"b", "not bytes")], b"m:pos", 9)
    assert db.get(b"a") is None and read_json(db, b"m:pos", "none") == "none"
    db.close()
