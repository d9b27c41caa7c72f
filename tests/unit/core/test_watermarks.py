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


def test_a_partition_with_unread_records_is_behind_not_idle():
    """Silent for idle_ms only because its reader has not got to its records yet (another
    input read first, or held back by the pacer): were it idle, the other partitions would
    move the watermark past those records, and they would come late."""
    clock, unread = Clock(), [True]
    for live in (False, True):
        policy = BoundedOutOfOrderness(ms=100, idle_ms=2000, live=live)
        source = BoundedLateness(policy, clock, lambda: 10**13)
        source.unread = lambda: unread[0]
        unread[0] = True
        clock.now = 0.0
        source.observe(5_000)
        clock.now = 50.0
        assert source.value() == (4_900, False), live
        unread[0] = False  # caught up: the silence counts from here
        clock.now = 51.9
        assert source.value() == (4_900, False), live
        clock.now = 52.0
        assert source.value() == ((None, True) if not live else (10**13 - 100, False)), live


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


def test_a_live_source_silent_for_idle_ms_follows_wall_time_less_its_bound():
    clock, wall = Clock(), [10_000]
    live = BoundedOutOfOrderness(ms=100, idle_ms=2000, live=True)
    source = BoundedLateness(live, clock, lambda: wall[0])
    assert source.value() == (None, False)
    source.observe(5_000)
    clock.now = 1.9
    assert source.value() == (4_900, False)
    clock.now = 2.0  # silent for idle_ms: the watermark follows the wall clock
    assert source.value() == (9_900, False)
    wall[0] = 12_000
    assert source.value() == (11_900, False)
    source.observe(11_000)  # a record stamped behind it does not move it back
    assert source.value() == (11_900, False)


def test_a_source_not_declared_live_holds_its_watermark_while_silent():
    """A paused replay of old data: silence never moves the watermark (it is idle, left out
    of the minimum, and a task whose inputs are all idle keeps what it had)."""
    clock = Clock()
    source = BoundedLateness(BoundedOutOfOrderness(ms=100, idle_ms=2000), clock, lambda: 10**13)
    source.observe(5_000)
    clock.now = 100.0
    assert source.value() == (None, True)


def test_a_timestamp_beyond_the_allowance_does_not_move_the_watermark_at_all():
    """Not even to wall time: genuine records that lag the clock by minutes stay on time."""
    wall = 1_700_000_000_000
    policy = BoundedOutOfOrderness(ms=100, max_future_ms=60_000)
    source = BoundedLateness(policy, Clock(), wall=lambda: wall)
    assert source.future_limit() == wall + 60_000
    source.observe(wall + 60_000)  # within the allowance: as before
    assert source.value() == (wall + 59_900, False)
    lagging = BoundedLateness(policy, Clock(), wall=lambda: wall)
    lagging.observe(wall - 300_000)  # genuine, five minutes behind the clock
    lagging.observe(wall + 50 * 60_000)  # fifty minutes ahead: moves nothing
    assert lagging.value() == (wall - 300_100, False)
    lagging.observe(wall - 290_000)  # ten seconds later in genuine time: not late
    assert lagging.value() == (wall - 290_100, False)


def test_a_partition_with_only_records_beyond_the_allowance_is_idle_like_an_empty_one():
    """It holds the low watermark back no longer than `idle_ms` (then the other partitions'
    minimum rules), and never pushes it forward: its records break no silence."""
    clock, wall = Clock(), 1_700_000_000_000
    policy = BoundedOutOfOrderness(ms=100, idle_ms=2000)
    genuine = BoundedLateness(policy, clock, wall=lambda: wall)
    future = BoundedLateness(policy, clock, wall=lambda: wall)
    assert future.value() == (None, False)  # silence counts from when reading starts
    genuine.observe(wall - 300_000)
    for i in range(20):
        clock.now = i * 0.1
        future.observe(wall + 3_000_000 + i)  # a steady flow of them
        genuine.observe(wall - 300_000 + i)
    assert combine([genuine.value(), future.value()]) == (None, False)  # as an empty one
    clock.now = 2.0
    assert future.value() == (None, True)
    assert combine([genuine.value(), future.value()]) == (wall - 300_100 + 19, False)
    future.observe(wall + 3_000_000)  # still idle: it is not activity
    assert future.value() == (None, True)
    live = BoundedLateness(BoundedOutOfOrderness(ms=100, idle_ms=2000, live=True), clock,
                           wall=lambda: wall)  # fmt: skip
    assert live.value() == (None, False)
    live.observe(wall + 3_000_000)
    clock.now = 4.0  # a live source's silent partition follows the clock, not the future
    assert live.value() == (wall - 100, False)


def test_a_writers_mark_names_every_partition_of_its_outputs():
    mark = Mark.of("a/task/0", 5, False, {("s", 1): 7, ("x", 0): 3}, ["s"], 4, partitions={"s": 3})
    assert mark.offsets == {("s", 0): -1, ("s", 1): 7, ("s", 2): -1}
    assert mark.input_watermark == 4
