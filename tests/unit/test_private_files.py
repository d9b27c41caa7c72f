"""What logwheel creates on disk is private: directories 0700 (the missing parents too),
files that hold data or secrets 0600."""

from __future__ import annotations

import stat

from framework.private_files import private_dir, write_private


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_private_dir_makes_every_missing_directory_0700_and_closes_an_old_one(tmp_path):
    leaf = private_dir(tmp_path / "a" / "b" / "c")
    assert [mode(p) for p in (leaf, leaf.parent, leaf.parent.parent)] == [0o700] * 3
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    old.chmod(0o755)
    private_dir(old)
    assert mode(old) == 0o700


def test_write_private_is_0600_even_over_a_readable_file(tmp_path):
    path = tmp_path / "instance-id"
    path.write_text("x")
    path.chmod(0o644)
    write_private(path, "abc")
    assert mode(path) == 0o600 and path.read_text() == "abc"
