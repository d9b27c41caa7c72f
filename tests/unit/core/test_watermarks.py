"""Pure watermark logic: published marks, bounded lateness with idleness, combining inputs."""

from __future__ import annotations

from framework.core.pipeline import BoundedOutOfOrderness
from framework.core.watermarks import BoundedLateness, Mark, Published, combine


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_silence_counts_from_when_reading_starts_not_from_creation():
    clock = Clock()
    source = BoundedLateness(BoundedOutOfOrderness(ms=100, idle_ms=2000), clock)
    clock.now = 10.0  # a long restore between creating the task and reading
    assert source.value() == (None, False)
    source.observe(5_000)
    assert source.value() == (4_900, False)
    clock.now = 11.9
    assert source.value() == (4_900, False)
    clock.now = 12.0
    assert source.value() == (None, True)
    source.observe(6_000)
    assert source.value() == (5_900, False)


def test_a_mark_applies_only_once_the_reader_is_past_its_offsets():
    p = Published("s", 0, ["a", "b"])
    p.offer(Mark("a", 100, False, {("s", 0): 9}))
    p.offer(Mark("b", 200, False, {("s", 1): 50}))  # wrote nothing to partition 0
    assert p.value() == (None, False)  # a's mark waits for offset 9 to be read
    p.advance(9)
    assert p.value() == (None, False)
    p.advance(10)
    assert p.value() == (100, False)


def test_a_lagging_reader_applies_the_newest_mark_it_has_passed():
    p = Published("s", 0, ["a"])
    for watermark, offset in [(100, 5), (200, 10), (300, 20)]:
        p.offer(Mark("a", watermark, False, {("s", 0): offset}))
    p.advance(15)
    assert p.value() == (200, False)


def test_combine_leaves_idle_inputs_out_and_is_unknown_until_all_report():
    assert combine([(5, False), (3, False)]) == (3, False)
    assert combine([(5, False), (None, True)]) == (5, False)
    assert combine([(5, False), (None, False)]) == (None, False)
    assert combine([(None, True), (None, True)]) == (None, True)


def test_an_undecodable_mark_is_skipped_and_counted():
    from prometheus_client import REGISTRY

    from framework.core.dead_letters import undecodable

    before = REGISTRY.get_sample_value(
        "logwheel_undecodable_internal_records_total", {"topic": "t.watermarks"}
    )
    undecodable("t.watermarks", ValueError("garbage"))
    after = REGISTRY.get_sample_value(
        "logwheel_undecodable_internal_records_total", {"topic": "t.watermarks"}
    )
    assert after == (before or 0) + 1
