"""The rescaled watermark channel (framework/rescale/marks.py) and the keys of regrouped id
segments (framework/rescale/writer.py)."""

from __future__ import annotations

import json

from framework import Computation, Dedup, Pipeline, key_by
from framework.core.api import MIN_TIME
from framework.core.watermarks import Mark
from framework.rescale.marks import rebuilt_marks
from framework.rescale.writer import segment_key


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def spec(partitions: int = 4):
    pipeline = Pipeline("rs", partitions=partitions)
    pipeline.source("clicks")
    pipeline.computation("c", Nothing, inputs={"clicks": key_by("u")}, outputs={"out": None},
                         dedup=Dedup())  # fmt: skip
    return pipeline["c"]


def task_mark(p: int, watermark: int, input_watermark: int, offsets: dict) -> Mark:
    return Mark(f"c/task/{p}", watermark, False, offsets, input_watermark)


def test_every_new_task_starts_at_the_old_minimum_and_waits_for_every_old_output():
    old = {
        "c/task/0": task_mark(0, 500, 700, {("out", 0): 10, ("out", 1): 4}),
        "c/task/1": task_mark(1, 300, 900, {("out", 0): 12, ("out", 1): -1}),
    }
    marks, deleted = rebuilt_marks(spec(), 2, 3, old, {}, {"out": 2}, {"clicks": 1})
    tasks = [m for m in marks if "/task/" in m.producer]
    assert [m.producer for m in tasks] == ["c/task/0", "c/task/1", "c/task/2"]
    for m in tasks:
        assert (m.watermark, m.input_watermark, m.idle) == (300, 700, False)
        assert m.offsets == {("out", 0): 12, ("out", 1): 4}
    assert deleted == []


def test_shrinking_deletes_the_marks_of_tasks_that_no_longer_exist():
    old = {f"c/task/{p}": task_mark(p, 100 + p, 100 + p, {}) for p in range(8)}
    marks, deleted = rebuilt_marks(spec(), 8, 3, old, {}, {"out": 1}, {"clicks": 1})
    assert {m.producer for m in marks} == {"c/task/0", "c/task/1", "c/task/2"}
    assert {m.watermark for m in marks} == {100}
    assert deleted == [f"c/task/{p}" for p in range(3, 8)]


def test_an_old_task_that_never_published_leaves_the_new_ones_unknown():
    old = {"c/task/0": task_mark(0, 100, 100, {})}
    marks, deleted = rebuilt_marks(spec(), 2, 3, old, {}, {"out": 1}, {"clicks": 1})
    assert marks == []
    assert deleted == ["c/task/0", "c/task/1", "c/task/2"]


def test_rekeying_marks_keep_their_watermark_and_wait_for_the_moved_pending_records():
    by_key = "rs.c.clicks.by-key"
    old = {"c/by-key/clicks/0": Mark("c/by-key/clicks/0", 800, False,
                                     {(by_key, 0): 55, (by_key, 3): 9}, MIN_TIME, 7)}  # fmt: skip
    marks, _ = rebuilt_marks(spec(), 4, 2, old, {(by_key, 1): 4}, {"out": 1}, {"clicks": 1})
    assert marks == [Mark("c/by-key/clicks/0", 800, False, {(by_key, 0): -1, (by_key, 1): 4},
                          MIN_TIME, 7)]  # fmt: skip


def test_regrouped_id_segments_have_the_same_keys_on_every_run():
    one = segment_key(1000, b'[1000, "ab"]', 2, "u1", 0)
    assert one == segment_key(1000, b'[1000, "ab"]', 2, "u1", 0)
    assert json.loads(one)[0] == 1000
    others = {segment_key(1000, b"[1000, \"ab\"]", p, k, c)
              for p, k, c in [(3, "u1", 0), (2, "u2", 0), (2, "u1", 1)]}  # fmt: skip
    assert one not in others and len(others) == 3
