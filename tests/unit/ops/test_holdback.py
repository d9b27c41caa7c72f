"""Which upstream producer holds a watermark back, and where it sits in the graph."""

from __future__ import annotations

from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by
from framework.core.api import MIN_TIME
from framework.core.pipeline import InjectorWatermark
from framework.core.watermarks import Mark
from framework.ops.holdback import describe_producer, held_back_by, upstream


def mark(producer: str, watermark: int, idle: bool = False) -> Mark:
    return Mark(producer, watermark, idle, {})


def test_the_lowest_of_producers_that_differ_holds_it_back():
    marks = {"a": mark("a", 5_000), "b": mark("b", 1_000), "c": mark("c", 9_000)}
    assert held_back_by(marks) == "b"


def test_nobody_is_named_when_they_agree_or_nothing_is_known():
    assert held_back_by({"a": mark("a", 5_000), "b": mark("b", 5_000)}) is None
    assert held_back_by({"a": mark("a", 5_000)}) is None
    assert held_back_by({"a": None, "b": mark("b", MIN_TIME)}) is None
    assert held_back_by({}) is None


def test_a_producer_not_heard_from_holds_back_the_others_but_an_idle_one_does_not():
    assert held_back_by({"a": mark("a", 5_000), "b": None}) == "b"
    assert held_back_by({"a": mark("a", 5_000), "b": mark("b", MIN_TIME)}) == "b"
    assert held_back_by({"a": mark("a", 5_000), "b": mark("b", 1, idle=True)}) is None


def pipeline() -> Pipeline:
    p = Pipeline("p", partitions=2)
    p.source("clicks", watermark=BoundedOutOfOrderness(ms=0))
    p.source("gen", watermark=InjectorWatermark("gen", processes=2))
    p.computation("count", Computation, inputs={"clicks": key_by("user"), "gen": None},
                  outputs={"counts": None})  # fmt: skip
    p.computation("sum", Computation, inputs={"counts": None})
    return p


def test_upstream_of_a_re_keyed_topic_is_every_partition_of_the_stream_it_re_keys():
    p = pipeline()
    channels, producers = upstream(p, p["count"], "p.count.clicks.by-key", 1, {"clicks": 3})
    assert channels == ["p.count.watermarks"]
    assert producers == [f"count/by-key/clicks/{r}" for r in range(3)]


def test_upstream_of_a_stream_is_its_writers_tasks_or_injector_and_none_for_a_bounded_source():
    p = pipeline()
    assert upstream(p, p["sum"], "counts", 0, {}) == (
        ["p.count.watermarks"],
        ["count/task/0", "count/task/1"],
    )
    assert upstream(p, p["count"], "gen", 0, {}) == (
        ["p.gen.watermarks"],
        ["gen/injector/0", "gen/injector/1"],
    )
    assert upstream(p, p["count"], "clicks", 0, {}) == ([], [])


def test_a_producer_is_placed_on_the_graph():
    PIPELINE = Pipeline("p").source("my.clicks")  # noqa: N806 - read as a constant below
    PIPELINE.computation("count", Computation, inputs={"my.clicks": key_by("user")})
    assert describe_producer(PIPELINE, "count/by-key/my.clicks/3") == {
        "node": "s:my.clicks", "partition": 3, "label": "my.clicks[3]"
    }  # fmt: skip
    assert describe_producer(PIPELINE, "count/task/1") == {
        "node": "c:count", "partition": 1, "label": "count[1]"
    }  # fmt: skip
    assert describe_producer(PIPELINE, "gen/injector/0")["label"] == "injector gen #0"
    assert describe_producer(PIPELINE, "odd")["label"] == "odd"
    assert describe_producer(PIPELINE, "gone/task/1")["node"] is None  # no such part now
