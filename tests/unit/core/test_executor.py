"""The executor behind Harness, the Kafka task and the backfill: hooks, state, timers,
watermarks, late records and failures — driven directly and through the Harness."""

from __future__ import annotations

import dataclasses

import pytest

from framework.core.api import MIN_TIME, Computation, Record, Timer
from framework.core.dedup import MemoryIdBackend
from framework.core.executor import Executor
from framework.core.pipeline import Dedup, Pipeline, key_by
from framework.errors import Retry
from framework.testing import Harness

# -- computations under test --------------------------------------------------------------


class Scripted(Computation):
    """Does what the record's value says: set/cancel timers, count, produce, raise."""

    def __init__(self) -> None:
        self.fired: list[tuple[str, Timer, int]] = []  # (key, timer, low watermark at firing)
        self.late: list[Record] = []

    def process_record(self, ctx, record):
        v = record.value
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        for tag, time, domain in v.get("set", []):
            ctx.set_timer(tag, time, domain)
        for tag in v.get("cancel", []):
            ctx.cancel_timer(tag)
        for stream in v.get("produce", []):
            ctx.produce(stream, {"n": ctx.state["n"]})
        if v.get("clear"):
            ctx.state.clear()
        if v.get("raise"):
            raise RuntimeError(v["raise"])
        if v.get("retry"):
            raise Retry(v["retry"])

    def process_timer(self, ctx, timer):
        self.fired.append((ctx.key, timer, ctx.low_watermark))
        ctx.produce("out", {"timer": timer.tag, "time": timer.time})
        if timer.tag.startswith("boom"):
            ctx.state["poisoned"] = True
            ctx.set_timer("again", timer.time + 1)
            raise ValueError("timer hook failed")


class LateCounter(Scripted):
    def on_late_record(self, ctx, record):
        self.late.append(record)
        ctx.state["late"] = ctx.state.get("late", 0) + 1
        if record.value.get("raise"):
            raise RuntimeError("late hook failed")


def pipeline(cls=Scripted) -> Pipeline:
    return (
        Pipeline("test")
        .source("in")
        .computation("c", cls, inputs={"in": key_by("k")}, outputs={"out": None, "side": None})
    )


def harness(cls=Scripted) -> Harness:
    return Harness(pipeline(cls), "c")


def send(h: Harness, key: str, ts: int, **value) -> None:
    h.send("in", "kafka-key", {"k": key, **value}, ts)


def fired(h: Harness) -> list[tuple[str, str, int]]:
    return [(key, t.tag, t.time) for key, t, _ in h.executor.computation.fired]


# -- timers -------------------------------------------------------------------------------


def test_event_timers_fire_per_key_in_increasing_time():
    h = harness()
    send(h, "a", 0, set=[["t3", 300, "event"], ["t1", 100, "event"]])
    send(h, "b", 0, set=[["t2", 200, "event"], ["t0", 50, "event"]])
    send(h, "a", 0, set=[["t2", 200, "event"]])
    assert h.advance_watermark(1000) == 5
    assert fired(h) == [
        ("b", "t0", 50),
        ("a", "t1", 100),
        ("a", "t2", 200),
        ("b", "t2", 200),  # ties: by time, then key, then tag
        ("a", "t3", 300),
    ]
    # the timer's output takes the timer's time as its timestamp
    assert [r.timestamp for r in h.outputs("out")] == [50, 100, 200, 200, 300]


def test_event_timer_fires_only_when_watermark_reaches_its_time():
    h = harness()
    send(h, "a", 0, set=[["t", 1000, "event"]])
    assert h.advance_watermark(999) == 0
    h.advance_processing_time(10**9)  # the clock does not fire event-time timers
    assert fired(h) == []
    assert h.advance_watermark(1000) == 1  # W >= t
    assert h.executor.computation.fired[0][2] == 1000  # ctx.low_watermark inside the hook
    assert h.timers() == []


def test_one_timer_per_key_and_tag_setting_again_moves_it():
    h = harness()
    send(h, "a", 0, set=[["t", 500, "event"]])
    send(h, "a", 0, set=[["t", 2000, "event"]])
    assert h.timers("a") == [("a", Timer(2000, "t", "event"))]
    assert h.advance_watermark(1000) == 0
    send(h, "a", 1000, set=[["t", 1500, "event"]])  # moving it earlier works too
    assert h.advance_watermark(5000) == 1
    assert fired(h) == [("a", "t", 1500)]


def test_cancel_timer():
    h = harness()
    send(h, "a", 0, set=[["t", 500, "event"], ["u", 600, "event"]], cancel=["t"])
    send(h, "a", 0, cancel=["nope"])  # cancelling an unset timer is a no-op
    assert h.advance_watermark(1000) == 1
    assert fired(h) == [("a", "u", 600)]


def test_timer_domains():
    h = harness()
    send(h, "a", 0, set=[["t", 1, "wall"]])
    [(_, error)] = h.dead_letters()
    assert error == "UsageError: timer domain 'wall': use 'event' or 'processing'"


def test_processing_time_timers_fire_on_the_clock():
    h = harness()
    send(h, "a", 0, set=[["p", 5000, "processing"]])
    assert h.executor.next_processing_timer() == 5000
    assert h.advance_watermark(10**12) == 0  # the watermark does not fire them
    assert h.advance_processing_time(4999) == 0
    assert h.advance_processing_time(5000) == 1
    assert fired(h) == [("a", "p", 5000)]
    assert h.executor.next_processing_timer() is None
    with pytest.raises(ValueError, match="cannot go back"):
        h.advance_processing_time(10)


def test_processing_time_timer_due_at_send_fires_right_after_the_record():
    h = harness()
    h.advance_processing_time(100)
    send(h, "a", 0, set=[["p", 50, "processing"]])
    assert fired(h) == [("a", "p", 50)]


def test_a_firing_may_set_timers_that_are_due_at_once():
    class Chain(Computation):
        def process_record(self, ctx, record):
            ctx.set_timer("next", 0)

        def process_timer(self, ctx, timer):
            ctx.produce("out", timer.time)
            if timer.time < 3000:
                ctx.set_timer("next", timer.time + 1000)

    p = (
        Pipeline("t")
        .source("in")
        .computation("c", Chain, inputs={"in": None}, outputs={"out": None})
    )
    h = Harness(p, "c")
    h.send("in", "k", {}, 0)
    assert h.advance_watermark(2500) == 3
    assert [r.value for r in h.outputs("out")] == [0, 1000, 2000]
    assert h.output_watermark() == 2500  # pending timer at 3000 is not due
    assert h.advance_watermark(10_000) == 1


def test_output_watermark_is_held_by_due_timers_only():
    ex = Executor(pipeline()["c"], _NoState(), _Timers([("a", Timer(100, "t"))]), _Sink())
    assert ex.output_watermark() == MIN_TIME
    ex.input_watermark = 50
    assert ex.output_watermark() == 50
    ex.input_watermark = 150  # raised without firing: the pending timer holds it at 100
    assert ex.output_watermark() == 100
    ex.fire_due()
    assert ex.output_watermark() == 150


def test_timers_survive_a_restart():
    h = harness()
    send(h, "a", 0, set=[["t", 100, "event"], ["p", 100, "processing"]], cancel=[])
    h.restart()
    assert [t for _, t in h.timers()] == [Timer(100, "p", "processing"), Timer(100, "t", "event")]
    assert h.state("a") == {"n": 1}
    assert h.advance_watermark(100) == 1
    assert h.advance_processing_time(100) == 1


# -- watermark and late records -----------------------------------------------------------


def test_watermark_is_never_lowered():
    h = harness()
    assert h.watermark == MIN_TIME
    h.advance_watermark(1000)
    h.advance_watermark(500)
    assert h.watermark == 1000
    assert h.executor.input_watermark == 1000


def test_late_records_are_counted_and_dropped_by_default():
    h = harness()
    h.advance_watermark(1000)
    send(h, "a", 999, produce=["out"], set=[["t", 2000, "event"]])  # late: 999 < 1000
    send(h, "a", 1000, produce=["out"])  # on time: ts == W is not late
    assert h.late_records == 1
    assert h.state("a") == {"n": 1}
    assert [r.timestamp for r in h.outputs("out")] == [1000]
    assert h.timers() == []
    assert h.dead_letters() == []


def test_late_records_go_to_on_late_record():
    h = harness(LateCounter)
    h.advance_watermark(1000)
    send(h, "a", 10)
    send(h, "a", 20)
    send(h, "a", 30, **{"raise": "x"})
    assert h.late_records == 3
    assert [r.timestamp for r in h.executor.computation.late] == [10, 20, 30]
    assert h.state("a") == {"late": 2}  # the raising one was rolled back
    [(dead, error)] = h.dead_letters()
    assert dead.timestamp == 30 and "late hook failed" in error
    assert h.dead_letter_details()[0].stage == "on_late_record"


def test_late_records_metric():
    from prometheus_client import REGISTRY

    def metric() -> float:
        return REGISTRY.get_sample_value("logwheel_late_records_total", {"computation": "c"}) or 0

    before = metric()
    h = harness()
    h.advance_watermark(10)
    send(h, "a", 0)
    assert metric() == before + 1


# -- failures -----------------------------------------------------------------------------


def test_raising_hook_is_dead_lettered_and_rolled_back():
    h = harness()
    send(h, "a", 0, set=[["keep", 100, "event"]])
    send(
        h,
        "a",
        1,
        set=[["keep", 900, "event"], ["new", 50, "event"]],
        produce=["out"],
        **{"raise": "boom"},
    )
    # its state change and timer changes are undone, its productions never emitted
    assert h.state("a") == {"n": 1}
    assert h.timers("a") == [("a", Timer(100, "keep"))]
    assert h.outputs("out") == []
    [(record, error)] = h.dead_letters()
    assert record.value["raise"] == "boom" and record.key == "a" and record.timestamp == 1
    assert error == "RuntimeError: boom"
    assert h.dead_letter_details()[0].stage == "process_record"
    # and the next record is processed
    send(h, "a", 2, produce=["out"])
    assert h.state("a") == {"n": 2}
    assert [r.value for r in h.outputs("out")] == [{"n": 2}]


def test_a_hook_that_meets_a_retry_is_rolled_back_and_raises_it_instead_of_a_dead_letter():
    """A table's registry away mid-hook: the record is fine, so the driver runs it again."""
    h = harness()
    send(h, "a", 0, set=[["keep", 100, "event"]])
    with pytest.raises(Retry, match="registry away"):
        send(h, "a", 1, set=[["new", 50, "event"]], produce=["out"], retry="registry away")
    assert h.state("a") == {"n": 1}
    assert h.timers("a") == [("a", Timer(100, "keep"))]
    assert h.outputs("out") == [] and h.dead_letters() == []
    send(h, "a", 1, produce=["out"])
    assert [r.value for r in h.outputs("out")] == [{"n": 2}]


def test_rollback_within_one_commit_keeps_earlier_hooks_changes():
    """Driven directly: several hooks between commits, the failing one alone is undone."""
    sink = _Sink()
    ex = Executor(pipeline()["c"], _NoState(), _Timers(), sink)
    ex.process(Record("a", {"set": [["t", 5, "event"]]}, 0, "in", "r1"))
    ex.process(Record("a", {"set": [["t", 9, "event"]], "produce": ["out"]}, 0, "in", "r2"))
    ex.process(
        Record("a", {"set": [["t", 1, "event"]], "cancel": ["t"], "raise": "x"}, 0, "in", "r3")
    )
    assert ex.state.get("a") == {"n": 2}
    assert ex.timers.get("a", "t") == Timer(9, "t")
    assert [p[2] for p in sink.produced] == [{"n": 2}]
    assert [(d[0].id, d[2]) for d in sink.dead] == [("r3", "process_record")]
    assert ex.state.changes() == [("a", b'{"n":2}')]
    assert ex.timers.changes() == [("a", "t", Timer(9, "t"))]


def test_a_dead_letter_reaches_the_output_with_the_source_its_record_was_processed_with():
    """The driver's handle of where a record was read (a Kafka message) goes with it to the
    output, whichever way the call fails; a timer's firing has none."""
    spec = pipeline(LateCounter)["c"]
    sink = _Sink()
    ex = Executor(spec, _NoState(), _Timers(), sink)
    ex.process(Record("a", {"raise": "x", "set": [["boom", 5, "event"]]}, 0, "in", "r1"), "m1")
    ex.process(Record("a", {"set": [["boom", 5, "event"]]}, 0, "in", "r2"), "m2")
    ex.advance_watermark(10)
    ex.process(Record("a", {"raise": "late"}, 3, "in", "r3"), "m3")  # on_late_record raises
    assert [(d[0].id, d[2], d[3]) for d in sink.dead] == [
        ("r1", "process_record", "m1"),
        (sink.dead[1][0].id, "process_timer", None),
        ("r3", "on_late_record", "m3"),
    ]

    spec = dataclasses.replace(pipeline()["c"], on_late="dead_letter")
    sink = _Sink()
    ex = Executor(spec, _NoState(), _Timers(), sink)
    ex.advance_watermark(10)
    ex.process(Record("a", {}, 3, "in", "r4"), "m4")  # dropped as late, to the dead letters
    assert [(d[0].id, d[2], d[3]) for d in sink.dead] == [("r4", "late", "m4")]

    spec = dataclasses.replace(pipeline()["c"], dedup=Dedup(id=lambda r: r.value["id"]))
    sink = _Sink()
    ex = Executor(spec, _NoState(), _Timers(), sink, ids=MemoryIdBackend())
    ex.process(Record("a", {}, 0, "in", "r5"), "m5")  # no id to deduplicate by
    ex.process(Record("a", {"id": "i6", "raise": "x"}, 0, "in", "r6"), "m6")
    assert [(d[0].id, d[2], d[3]) for d in sink.dead] == [
        ("r5", "dedup", "m5"),
        ("r6", "process_record", "m6"),
    ]


def test_raise_after_clearing_a_new_key_leaves_it_empty():
    h = harness()
    send(h, "fresh", 0, clear=True, **{"raise": "x"})
    assert h.state("fresh") == {}
    assert h.executor.state.peek("fresh") is None


def test_raising_timer_hook_is_dead_lettered_and_counts_as_fired():
    h = harness()
    send(h, "a", 0, set=[["boom", 100, "event"]])
    assert h.advance_watermark(200) == 1
    [dead] = h.dead_letter_details()
    assert dead.stage == "process_timer"
    assert dead.record.key == "a" and dead.record.stream == "<timer>"
    assert dead.record.value == {"timer": "boom", "time": 100, "domain": "event"}
    assert dead.record.timestamp == 100 and len(dead.record.id) == 32
    assert h.state("a") == {"n": 1}  # the firing's state change is undone
    assert h.timers() == []  # ...and so is the timer it set; the fired one stays fired
    assert h.outputs("out") == []
    assert h.advance_watermark(10_000) == 0


def test_key_extractor_failure_is_a_dead_letter():
    h = harness()
    h.send("in", "kafka-key", {"no-k": 1}, 0)
    [dead] = h.dead_letter_details()
    assert dead.stage == "key" and isinstance(dead.error, KeyError)
    assert h.executor.state.peek("kafka-key") is None


def test_produce_to_undeclared_stream_raises_a_clear_error():
    h = harness()
    send(h, "a", 0, produce=["nope"])
    [(_, error)] = h.dead_letters()
    assert "'nope'" in error and "declared outputs ['out', 'side']" in error
    assert "outputs=" in error  # names the fix
    assert h.state("a") == {}


def test_value_its_schema_rejects_is_an_encode_dead_letter():
    class Bad(Computation):
        def process_record(self, ctx, record):
            ctx.produce("counts", {"key": "q"})  # misses start, end, value

    p = (
        Pipeline("t")
        .source("in")
        .computation("c", Bad, inputs={"in": None}, outputs={"counts": "zeitgeist.WindowResult"})
    )
    h = Harness(p, "c")
    h.send("in", "k", {}, 0)
    assert h.outputs("counts") == []
    assert [d.stage for d in h.dead_letter_details()] == ["encode"]


class HalfGood(Computation):
    """Counts, produces a good record, then one its schema rejects (or state that is not
    JSON): the whole call must be undone."""

    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.set_timer("t", 100)
        ctx.produce("out", {"n": ctx.state["n"]})
        if record.value.get("bad") == "output":
            ctx.produce("counts", {"key": "q"})
        elif record.value.get("bad") == "state":
            ctx.state["s"] = {1, 2}


def half_good() -> Harness:
    p = Pipeline("t").source("in")
    p.computation(
        "c",
        HalfGood,
        inputs={"in": None},
        outputs={"out": None, "counts": "zeitgeist.WindowResult"},
    )
    return Harness(p, "c")


@pytest.mark.parametrize(("bad", "stage"), [("output", "encode"), ("state", "state")])
def test_a_hook_call_is_atomic_at_the_hook(bad, stage):
    h = half_good()
    h.send("in", "k", {}, 0)
    h.send("in", "k", {"bad": bad}, 0)
    h.send("in", "k", {}, 0)
    assert [r.value for r in h.outputs("out")] == [{"n": 1}, {"n": 2}]
    assert h.state("k") == {"n": 2}
    assert [d.stage for d in h.dead_letter_details()] == [stage]


def test_a_failed_production_fails_the_call_even_if_the_hook_catches_it():
    class Swallowing(Computation):
        def process_record(self, ctx, record):
            ctx.state["n"] = 1
            ctx.produce("out", {"first": True})
            try:  # noqa: SIM105 - the point: a hook that swallows the error
                ctx.produce("counts", {"key": "q"})  # its schema rejects it
            except Exception:
                pass

    p = Pipeline("t").source("in")
    p.computation(
        "c",
        Swallowing,
        inputs={"in": None},
        outputs={"out": None, "counts": "zeitgeist.WindowResult"},
    )
    h = Harness(p, "c")
    h.send("in", "k", {}, 0)
    assert h.outputs("out") == [] and h.state("k") == {}
    assert [d.stage for d in h.dead_letter_details()] == ["encode"]


def test_key_extractors_must_return_str_everywhere():
    p = Pipeline("t").source("in")
    p.computation("c", Scripted, inputs={"in": lambda r: r.value.get("k")}, outputs={"out": None})
    h = Harness(p, "c")
    h.send("in", "kafka-key", {"no": "k"}, 0)
    h.send("in", "kafka-key", {"k": 5}, 0)
    h.send("in", "kafka-key", {"k": "a"}, 0)
    assert [d.stage for d in h.dead_letter_details()] == ["key", "key"]
    assert "returned NoneType, not str" in h.dead_letters()[0][1]
    assert "returned int, not str" in h.dead_letters()[1][1]
    assert h.state("a") == {"n": 1}


@pytest.mark.parametrize("policy", ["skip", "stop"])
def test_error_policies_in_the_harness(policy):
    from framework.errors import Fatal

    p = Pipeline("t").source("in")
    p.computation("c", Scripted, inputs={"in": key_by("k")}, on_error=policy)
    h = Harness(p, "c")
    if policy == "stop":
        with pytest.raises(Fatal, match="on_error='stop'"):
            h.send("in", "x", {"k": "a", "raise": "boom"}, 0)
    else:
        h.send("in", "x", {"k": "a", "raise": "boom"}, 0)
        assert h.dead_letters() == []


# -- productions --------------------------------------------------------------------------


def test_production_ids_are_deterministic_and_unique():
    def run() -> list[str]:
        h = harness()
        for i in range(20):
            send(h, f"k{i % 3}", i, produce=["out", "side", "out"], set=[["t", 100 + i, "event"]])
        h.advance_watermark(1000)
        return [r.id for s in ("out", "side") for r in h.outputs(s)]

    first, second = run(), run()
    assert first == second
    assert len(first) == 20 * 3 + 3 and len(set(first)) == len(first)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in first)


def test_a_retried_hook_produces_the_same_ids():
    """The Kafka task re-runs a record after an aborted commit: same input id, same ids."""
    ids = []
    for _ in range(2):
        sink = _Sink()
        ex = Executor(pipeline()["c"], _NoState(), _Timers(), sink)
        ex.process(Record("a", {"produce": ["out", "out"]}, 0, "in", "input-id-1"))
        ids.append([p[4] for p in sink.produced])
    assert ids[0] == ids[1] and len(set(ids[0])) == 2


def test_produce_defaults_and_overrides():
    class P(Computation):
        def process_record(self, ctx, record):
            ctx.produce("out", (1, 2))
            ctx.produce("out", "x", key="other", timestamp=record.timestamp + 5)

    p = Pipeline("t").source("in").computation("c", P, inputs={"in": None}, outputs={"out": None})
    h = Harness(p, "c")
    h.send("in", "k", {}, 7)
    a, b = h.outputs("out")
    assert (a.key, a.value, a.timestamp, a.stream) == ("k", [1, 2], 7, "out")  # JSON round trip
    assert (b.key, b.value, b.timestamp) == ("other", "x", 12)


def test_a_production_is_the_value_as_it_was_when_produced():
    class Mutating(Computation):
        def process_record(self, ctx, record):
            counts = ctx.state.setdefault("counts", {"a": 1})
            ctx.produce("out", counts)
            counts["a"] += 1  # after produce: must not change what was produced
            ctx.produce("out", counts)
            counts.clear()

    p = (
        Pipeline("t")
        .source("in")
        .computation("c", Mutating, inputs={"in": None}, outputs={"out": None})
    )
    h = Harness(p, "c")
    h.send("in", "k", {}, 0)
    assert [r.value for r in h.outputs("out")] == [{"a": 1}, {"a": 2}]


def test_harness_rejects_unknown_streams():
    h = harness()
    with pytest.raises(ValueError, match=r"inputs are \['in'\]"):
        h.send("out", "k", {}, 0)
    with pytest.raises(ValueError, match=r"outputs are \['out', 'side'\]"):
        h.outputs("in")


# -- helpers ------------------------------------------------------------------------------


class _NoState:
    def load(self, key):
        return None


class _Timers:
    def __init__(self, pending=()):
        self.pending = list(pending)

    def load_all(self):
        return self.pending


class _Sink:
    def __init__(self):
        self.produced: list[tuple] = []
        self.dead: list[tuple] = []

    def encode(self, stream, key, value, timestamp, record_id):
        return (stream, key, value, timestamp, record_id)

    def produce_all(self, encoded):
        self.produced.extend(encoded)

    def dead_letter(self, record, error, stage, source=None):
        self.dead.append((record, error, stage, source))


# -- replayed dead letters ----------------------------------------------------------------


def test_a_replayed_record_is_never_late_nor_a_duplicate_and_moves_no_watermark():
    spec = dataclasses.replace(pipeline()["c"], dedup=Dedup())
    sink = _Sink()
    ex = Executor(spec, _NoState(), _Timers(), sink, ids=MemoryIdBackend())
    ex.advance_watermark(1000)
    ex.process(Record("a", {"raise": "x"}, 500, "in", "r1"), "m1")  # late: dropped
    ex.process(Record("a", {}, 1500, "in", "r2"), "m2")  # its id is now seen
    ex.process_replayed(Record("a", {"produce": ["out"]}, 500, "in", "r1"), "m3")
    ex.process_replayed(Record("a", {"produce": ["out"]}, 1500, "in", "r2"), "m4")
    assert [p[3] for p in sink.produced] == [500, 1500]  # at their own, old, times
    assert ex.late_records == 1 and ex.duplicates == 0
    assert ex.input_watermark == 1000
    ex.process(Record("a", {"produce": ["out"]}, 400, "in", "r5"), "m5")  # late again after it
    assert ex.late_records == 2 and len(sink.produced) == 2
    ex.process_replayed(Record("a", {"raise": "again"}, 300, "in", "r6"), "m6")
    assert [(d[0].id, d[2], d[3]) for d in sink.dead] == [("r6", "process_record", "m6")]
