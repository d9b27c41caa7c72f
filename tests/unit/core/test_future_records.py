"""Records stamped beyond their source's skew allowance, through the Harness (which files them
by the rule the Kafka task and the backfill use, core/future_records.py): counted, processed
at wall time plus the allowance — where their windows and timers are filed too — or
dead-lettered at stage "future"; a stream that is no source is not judged."""

from __future__ import annotations

from framework import BoundedOutOfOrderness, Computation, Pipeline, windows
from framework.core.future_records import future_error, future_limit, future_policy
from framework.testing import Harness

WALL = 1_700_000_000_000
AHEAD = 50 * 60_000


class Echo(Computation):
    """Produces each record's timestamp and sets an event-time timer a second after it."""

    def process_record(self, ctx, record):
        ctx.produce("out", {"ts": record.timestamp})
        ctx.set_timer("t", record.timestamp + 1_000)


def _harness(watermark=BoundedOutOfOrderness(ms=0), source: bool = True) -> Harness:  # noqa: B008
    pipeline = Pipeline("p")
    if source:
        pipeline.source("in", watermark=watermark)
    pipeline.computation("c", Echo, inputs={"in": None}, outputs={"out": None})
    h = Harness(pipeline, "c")
    h.wall = lambda: WALL
    return h


def test_a_record_beyond_the_allowance_is_processed_filed_at_wall_time_plus_it():
    h = _harness()
    h.send("in", "k", {}, WALL + 300_000)  # at the limit: its own time
    h.send("in", "k", {}, WALL + AHEAD)
    assert [r.value["ts"] for r in h.outputs("out")] == [WALL + 300_000] * 2
    assert [r.timestamp for r in h.outputs("out")] == [WALL + 300_000] * 2
    assert [t.time for _, t in h.timers("k")] == [WALL + 301_000]
    assert h.future_records == 1 and not h.dead_letters()


def test_under_on_future_dead_letter_it_goes_to_the_dead_letters_at_stage_future():
    h = _harness(BoundedOutOfOrderness(ms=0, max_future_ms=1_000, on_future="dead_letter"))
    h.send("in", "k", {"n": 1}, WALL + 1_001)
    h.send("in", "k", {"n": 2}, WALL)
    [dead] = h.dead_letter_details()
    assert (dead.stage, dead.record.timestamp, dead.record.value) == (
        "future",
        WALL + 1_001,
        {"n": 1},
    )
    assert "max_future_ms=1000" in dead.describe()
    assert [r.value["ts"] for r in h.outputs("out")] == [WALL]
    assert h.future_records == 1


def test_a_windowed_computation_files_it_in_the_window_of_wall_time_plus_the_allowance():
    pipeline = Pipeline("p")
    pipeline.source("in", watermark=BoundedOutOfOrderness(ms=0))
    pipeline.windowed(
        "w", inputs={"in": None}, window=windows.Tumbling(size_ms=60_000),
        aggregate=windows.Count(), output="counts",
    )  # fmt: skip
    h = Harness(pipeline, "w")
    h.wall = lambda: WALL
    h.send("in", "k", {}, WALL + 365 * 86_400_000)  # a year ahead
    limit = WALL + 300_000
    h.advance_watermark(limit - limit % 60_000 + 60_000)
    [count] = h.outputs("counts")
    assert count.value["value"] == 1 and count.value["start"] == limit - limit % 60_000


def test_records_of_a_stream_that_is_no_source_or_has_no_bound_keep_their_time():
    for h in (_harness(source=False), _harness(watermark=None)):
        h.send("in", "k", {}, WALL + AHEAD)
        assert [r.value["ts"] for r in h.outputs("out")] == [WALL + AHEAD]
        assert h.future_records == 0


def test_the_rule_itself():
    pipeline = Pipeline("p").source("in", watermark=BoundedOutOfOrderness(ms=5, max_future_ms=7))
    pipeline.source("free")
    policy = future_policy(pipeline, "in")
    assert policy is not None and future_policy(pipeline, "free") is None
    assert future_policy(pipeline, "not-a-source") is None
    assert future_limit(policy, 100) == 107
    error = future_error(policy, 200)
    assert error.stage == "future" and "timestamp 200" in str(error)
