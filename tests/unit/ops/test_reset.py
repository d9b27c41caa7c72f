"""`logwheel reset --wipe-state` holds the state dir as `logwheel run` does, before it touches
Kafka, and never reports local state removed when it was not."""

from __future__ import annotations

from types import SimpleNamespace

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


class _Topics:
    def __init__(self, names: dict[str, int]) -> None:
        self.topics = {
            name: SimpleNamespace(partitions=dict.fromkeys(range(n))) for name, n in names.items()
        }


class _Consumer:
    """What `_plan` asks of a consumer: the topics, and each partition's offsets (0 to 10)."""

    def __init__(self, names: dict[str, int]) -> None:
        self.names = names

    def list_topics(self, timeout):
        return _Topics(self.names)

    def get_watermark_offsets(self, tp, timeout):
        return 0, 10


def test_the_plan_skips_the_replays_still_waiting_whose_originals_run_again():
    from framework import key_by
    from framework.ops.reset import _plan

    spec = (
        Pipeline("p", partitions=2)
        .source("in")
        .computation("c", Noop, inputs={"in": key_by("k")})["c"]
    )
    consumer = _Consumer({"in": 1, spec.by_key("in"): 2, spec.replay: 2, spec.replayed: 1})
    moves = {(tp.topic, tp.partition): tp.offset for tp in _plan(consumer, spec, "earliest")}
    assert moves == {
        ("in", 0): 0,
        (spec.by_key("in"), 0): 10, (spec.by_key("in"), 1): 10,
        (spec.replay, 0): 10, (spec.replay, 1): 10,
    }  # fmt: skip
