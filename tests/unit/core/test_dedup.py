"""Record-id deduplication in the executor (through the Harness, which drives the same
`Executor` as Kafka and Spark): duplicates never reach the hook, ids are per key, survive a
restart, are collected by event time, and a record with no id is dead-lettered."""

from __future__ import annotations

import pytest

from framework import BoundedOutOfOrderness, Computation, Dedup, Pipeline, PipelineError, windows
from framework.errors import Retry
from framework.testing import Harness


class Clicks(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.produce("counts", {"n": ctx.state["n"]})


def _harness(dedup: Dedup | None = Dedup(), factory=Clicks) -> Harness:  # noqa: B008
    pipeline = Pipeline("clicks")
    pipeline.source("clicks")
    pipeline.computation(
        "count", factory, inputs={"clicks": None}, outputs={"counts": None}, dedup=dedup
    )
    return Harness(pipeline, "count")


def test_a_record_seen_before_for_its_key_is_dropped_before_the_hook_and_counted():
    h = _harness()
    for rid in ["a", "b", "a", "c", "b"]:
        h.send("clicks", "ann", {}, 1_000, record_id=rid)
    assert h.state("ann") == {"n": 3}
    assert [r.value["n"] for r in h.outputs("counts")] == [1, 2, 3]
    assert h.duplicates == 2


def test_without_dedup_the_same_records_are_counted_twice():
    h = _harness(dedup=None)
    for rid in ["a", "b", "a", "c", "b"]:
        h.send("clicks", "ann", {}, 1_000, record_id=rid)
    assert h.state("ann") == {"n": 5}


def test_the_same_id_under_another_key_is_not_a_duplicate():
    h = _harness()
    h.send("clicks", "ann", {}, 1_000, record_id="a")
    h.send("clicks", "bob", {}, 1_000, record_id="a")
    assert h.state("ann") == h.state("bob") == {"n": 1}


def test_the_id_can_come_from_the_value():
    h = _harness(Dedup(id=lambda r: r.value["click"]))
    for click in [1, 2, 1]:
        h.send("clicks", "ann", {"click": click}, 1_000)  # a fresh record id each time
    assert h.state("ann") == {"n": 2} and h.duplicates == 1


def test_ids_survive_a_restart():
    h = _harness()
    h.send("clicks", "ann", {}, 1_000, record_id="a")
    h.restart()
    h.send("clicks", "ann", {}, 1_000, record_id="a")
    assert h.state("ann") == {"n": 1} and h.duplicates == 1


@pytest.mark.parametrize("id_of", [lambda r: r.value.get("click"), lambda r: r.value["click"]])
def test_a_record_with_no_id_goes_to_the_dead_letters_with_its_reason(id_of):
    h = _harness(Dedup(id=id_of))
    h.send("clicks", "ann", {}, 1_000)  # None, or a KeyError
    h.send("clicks", "bob", {"click": 1}, 1_000)  # the rest flows
    [(record, reason)] = h.dead_letters()
    assert record.key == "ann" and "no record id" in reason
    assert h.dead_letter_details()[0].stage == "dedup"
    assert h.state("ann") == {} and h.state("bob") == {"n": 1}


def test_ids_are_collected_by_event_time_and_their_count_stays_bounded():
    horizon = 10_000
    h = _harness(Dedup(horizon_ms=horizon))
    held = []
    for t in range(0, 200_000, 100):  # 2,000 records, one every 100 ms, watermark 1 s behind
        h.send("clicks", f"user-{t % 7}", {}, t, record_id=f"click-{t}")
        h.advance_watermark(t - 1_000)
        held.append(len(h._id_backend.held))
    # within horizon + a slice + the watermark's lag: 137 ids at 100 ms apart, never 2,000
    assert max(held) <= (horizon + horizon // 4 + 1_000) // 100 + 1
    assert held[-1] >= horizon // 100


def test_a_duplicate_within_the_horizon_is_dropped_and_one_past_it_is_counted_expired():
    from framework.core.metrics import DEDUP_EXPIRED

    class OnLate(Clicks):
        def on_late_record(self, ctx, record):
            self.process_record(ctx, record)

    h = _harness(Dedup(horizon_ms=10_000), factory=OnLate)
    h.send("clicks", "ann", {}, 1_000, record_id="a")
    h.advance_watermark(9_000)
    h.send("clicks", "ann", {}, 1_000, record_id="a")  # late, but within the horizon
    assert h.state("ann") == {"n": 1}
    expired = DEDUP_EXPIRED.labels("count")._value.get()
    h.advance_watermark(20_000)  # its id is collected
    h.send("clicks", "ann", {}, 1_000, record_id="a")
    assert h.state("ann") == {"n": 2}
    assert DEDUP_EXPIRED.labels("count")._value.get() == expired + 1


def test_ids_of_records_stamped_far_ahead_keep_the_filter_bounded_and_are_collected():
    """Issue 38, finding 2: each record stamped in a slice of its own far in the future took
    a Bloom generation (~1 MiB at the default size) that no collection ever reached, rebuilt
    at every start. Filed at wall time plus the source's allowance, 200 of them share what
    one slice past the clock holds, are still deduplicated, and go once genuine time passes
    that slice plus the horizon — across a restart too."""
    horizon, wall = 3_600_000, 1_700_000_000_000
    pipeline = Pipeline("clicks")
    pipeline.source("clicks", watermark=BoundedOutOfOrderness(ms=0))
    pipeline.computation(
        "count", Clicks, inputs={"clicks": None}, outputs={"counts": None},
        dedup=Dedup(horizon_ms=horizon),
    )  # fmt: skip
    h = Harness(pipeline, "count")
    h.wall = lambda: wall
    h.advance_watermark(wall - 60_000)
    h.send("clicks", "ann", {}, wall - 1_000, record_id="genuine")
    for i in range(200):  # each in a slice (a quarter of the horizon) of its own
        h.send("clicks", "ann", {}, wall + (i + 1) * horizon, record_id=f"ahead-{i}")
    ids = h.executor.ids
    assert h.future_records == 200 and h.state("ann") == {"n": 201}
    assert ids.filter.slices <= 2, f"{ids.filter.slices} generations for 201 ids"
    h.restart()  # the filter is rebuilt from the held segments: no more of it
    assert h.executor.ids.filter.slices <= 2
    h.send("clicks", "ann", {}, wall + 7 * horizon, record_id="ahead-3")
    assert h.duplicates == 1
    h.advance_watermark(wall + 300_000 + horizon + horizon // 4)
    assert h.executor.ids.filter.slices == 0 and not h._id_backend.held


def test_a_record_to_be_retried_is_not_remembered():
    class Flaky(Clicks):
        tries = 0

        def process_record(self, ctx, record):
            Flaky.tries += 1
            if Flaky.tries == 1:
                raise Retry("the registry is away")
            super().process_record(ctx, record)

    h = _harness(factory=Flaky)
    with pytest.raises(Retry):
        h.send("clicks", "ann", {}, 1_000, record_id="a")
    h.send("clicks", "ann", {}, 1_000, record_id="a")  # the runtime runs it again
    assert h.state("ann") == {"n": 1} and h.duplicates == 0


def test_a_windowed_computation_drops_duplicates_too():
    pipeline = Pipeline("clicks")
    pipeline.source("clicks")
    pipeline.windowed(
        "per-minute",
        inputs={"clicks": None},
        window=windows.Tumbling(size_ms=60_000),
        aggregate=windows.Count(),
        output="per-minute",
        dedup=Dedup(),
    )
    h = Harness(pipeline, "per-minute")
    for rid in ["a", "b", "a"]:
        h.send("clicks", "ann", {}, 1_000, record_id=rid)
    h.advance_watermark(60_000)
    assert [r.value["value"] for r in h.outputs("per-minute")] == [2]


@pytest.mark.parametrize(
    "dedup",
    [
        lambda: Dedup(horizon_ms=0),
        lambda: Dedup(id="click"),
        lambda: Dedup(false_positive_rate=1.5),
        lambda: "yes",
    ],
)
def test_a_bad_dedup_declaration_fails_at_once_saying_what_to_give(dedup):
    pipeline = Pipeline("clicks")
    with pytest.raises(PipelineError, match="give|use"):
        pipeline.computation("count", Clicks, inputs={"clicks": None}, dedup=dedup())
