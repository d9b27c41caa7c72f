"""What a `logwheel run` process settles before it joins: its state directory to itself, and
an instance id that outlives restarts."""

from __future__ import annotations

import pytest

from framework.core.pipeline import PipelineError
from framework.streaming.state_dir import instance_id, lock_state_dir


def test_a_second_process_on_one_state_dir_is_refused_with_the_fix(tmp_path):
    held = lock_state_dir(tmp_path / "state")
    try:
        with pytest.raises(PipelineError, match="give each instance its own --state-dir"):
            lock_state_dir(tmp_path / "state")
    finally:
        held.close()
    lock_state_dir(tmp_path / "state").close()  # free again once the holder is gone


def test_the_instance_id_is_kept_across_restarts_unless_one_is_given(tmp_path):
    first = instance_id(tmp_path, None)
    assert instance_id(tmp_path, None) == first
    assert instance_id(tmp_path, "pod-3") == "pod-3"
    assert (
        instance_id(tmp_path / "other", None) != first
        if (tmp_path / "other").mkdir() is None
        else False
    )
