"""`logwheel reset --wipe-state` holds the state dir as `logwheel run` does, before it touches
Kafka, and never reports local state removed when it was not."""

from __future__ import annotations

import pytest

from framework import Computation, Pipeline, PipelineError
from framework.ops import reset as reset_module
from framework.streaming.state_dir import lock_state_dir


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


pipeline = Pipeline("p").source("in").computation("c", Noop, inputs={"in": None})


def test_a_state_dir_in_use_is_refused_before_kafka_is_touched(tmp_path):
    held = lock_state_dir(tmp_path / "p" / "c")
    try:
        with pytest.raises(PipelineError, match="in use by another"):
            reset_module.reset(pipeline, "c", "earliest", bootstrap="127.0.0.1:1",
                               state_dir=tmp_path, wipe_state=True)  # fmt: skip
    finally:
        held.close()


def test_local_state_that_cannot_be_removed_fails_loudly(tmp_path, monkeypatch):
    local = tmp_path / "p" / "c"
    (local / "store").mkdir(parents=True)
    (local / "lock").touch()

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(reset_module.shutil, "rmtree", refuse)
    with pytest.raises(PipelineError, match=r"cannot remove local state .*store.*by hand"):
        reset_module._remove_local_state(local)
    monkeypatch.undo()
    reset_module._remove_local_state(local)
    assert not local.exists()
