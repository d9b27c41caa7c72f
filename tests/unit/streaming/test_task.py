"""What a task knows of an input partition after a run of its records, and where its bad
records go."""

from __future__ import annotations

import json

from confluent_kafka import Message

from framework.core.api import Computation, Timer
from framework.core.clock import now_ms
from framework.core.dead_letters import ErrorPolicy
from framework.core.dedup import Dedup
from framework.core.pipeline import BoundedOutOfOrderness, Pipeline, key_by
from framework.core.timers import decode_timer
from framework.core.watermarks import BoundedLateness, Published
from framework.kafka.limits import Limit, TopicLimits
from framework.kafka.output import PartIO
from framework.state.store import TaskStore
from framework.streaming.input_partition import InputPartition
from framework.streaming.task import KeyedTask, RepartitionTask
from tests.unit.kafka.fakes import fake_collector


def _msgs(*timestamps: int) -> list[Message]:
    return [
        Message(topic="t", partition=0, offset=10 + i, value=b"{}", timestamp=(1, ts))
        for i, ts in enumerate(timestamps)
    ]


def _partition(watermark) -> InputPartition:
    return InputPartition("t", 0, "t", lambda raw: raw, watermark, [])


def test_a_run_moves_the_position_and_the_watermark_as_its_records_one_by_one_would():
    one, run = (
        _partition(BoundedLateness(BoundedOutOfOrderness(ms=5), clock=lambda: 0.0))
        for _ in range(2)
    )
    msgs = _msgs(100, 300, 200)
    for msg in msgs:
        one.consumed(msg)
    run.consumed_run(msgs)
    assert (run.position, run.read) == (one.position, one.read) == (13, 3)
    assert run.watermark.value() == one.watermark.value() == (295, False)


def test_a_watermark_that_ignores_what_is_read_is_not_shown_it():
    inp = _partition(Published("t", 0, ["upstream"]))
    assert not inp._observes
    inp.consumed_run(_msgs(100))
    assert inp.position == 11


# -- bad records: the one dead-letter path, with the message each was read from ----------------


class Count(Computation):
    def process_record(self, ctx, record):
        if record.value.get("boom"):
            raise RuntimeError("boom")
        ctx.produce("out", {"n": 1})

    def process_timer(self, ctx, timer):
        raise RuntimeError("timer boom")


def _io(monkeypatch) -> PartIO:
    pipeline = (
        Pipeline("dl", partitions=1)
        .source("in")
        .computation("c", Count, inputs={"in": key_by("user")}, outputs={"out": None})
    )
    spec = pipeline["c"]
    counts = {"in": 1, spec.by_key("in"): 1}
    collector = fake_collector(monkeypatch, TopicLimits({spec.by_key("in"): Limit(200)}))
    return PartIO(pipeline, spec, collector, counts, ErrorPolicy(spec.group, "dead_letter"))


def _sent(io: PartIO) -> list[tuple]:
    io.collector.flush()
    return io.collector.producer.produced


def _told(produced: tuple) -> tuple:
    headers = dict(produced[5])
    where = (headers["logwheel.source.topic"], headers["logwheel.source.offset"])
    return produced[2], headers["logwheel.error.stage"], *where, headers.get("trace")


def _raw(topic: str, offset: int, value: bytes) -> Message:
    return Message(topic=topic, partition=0, offset=offset, key=b"kk", value=value,
                   timestamp=(1, 1_000 + offset), headers=[("trace", b"t")])  # fmt: skip


def test_the_re_keying_task_writes_each_record_under_its_key_or_dead_letters_it(monkeypatch):
    io = _io(monkeypatch)
    task = RepartitionTask(io, io.spec.inputs[0], 0)
    [inp] = task.inputs
    values = [b'{"user": "ann"}', b"garbage", b'{"other": 1}', b'{"user": "' + b"x" * 200 + b'"}']
    for offset, value in enumerate(values):
        task.handle(_raw("in", offset, value), inp)
    assert inp.position == 4
    by_key, *dead = _sent(io)
    assert by_key == (
        io.spec.by_key("in"),
        b"ann",
        values[0],
        0,
        1_000,
        [("logwheel.id", b"in/0/0")],
    )
    assert [_told(d) for d in dead] == [
        (values[1], b"decode", b"in", b"1", b"t"),
        (values[2], b"key", b"in", b"2", b"t"),
        (values[3], b"produce", b"in", b"3", b"t"),
    ]


def test_a_keyed_tasks_bad_records_are_dead_letters_of_the_messages_they_were_read_from(
    monkeypatch, tmp_path
):
    io = _io(monkeypatch)
    task = KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))
    [inp] = task.inputs
    topic = io.spec.by_key("in")
    values = [b'{"user": "ann"}', b"garbage", b'{"user": "ann", "boom": true}', b'{"user": "bo"}']
    task.handle_run([_raw(topic, offset, value) for offset, value in enumerate(values)], inp)
    task.executor.timers.set("ann", Timer(5, "t"))
    task.executor.advance_watermark(10)  # the timer's hook fails: a dead letter of no message
    assert inp.position == 4
    sent = _sent(io)
    assert [p[2] for p in sent if p[0] == "out"] == [b'{"n":1}'] * 2
    dead = [p for p in sent if p[0] == io.spec.dlq]
    assert [_told(d) for d in dead[:2]] == [
        (values[1], b"decode", topic.encode(), b"1", b"t"),
        (values[2], b"process_record", topic.encode(), b"2", b"t"),
    ]
    assert _told(dead[2])[1:] == (b"process_timer", b"", b"", None)


# -- records stamped beyond the skew allowance (issue 38, findings 2 and 3) ---------------------


class Stamps(Computation):
    def process_record(self, ctx, record):
        ctx.produce("out", {"ts": record.timestamp})


def _future_io(monkeypatch, key=None, **policy) -> PartIO:
    pipeline = (
        Pipeline("fut", partitions=1)
        .source("in", watermark=BoundedOutOfOrderness(ms=2_000, **policy))
        .computation("c", Stamps, inputs={"in": key}, outputs={"out": None}, dedup=Dedup())
    )
    spec = pipeline["c"]
    collector = fake_collector(monkeypatch)
    counts = {"in": 1, spec.by_key("in"): 1}
    return PartIO(pipeline, spec, collector, counts, ErrorPolicy(spec.group, "dead_letter"))


def _stamped(offset: int, ts: int) -> Message:
    return Message(topic="in", partition=0, offset=offset, key=b"k", value=b'{"user": "u"}',
                   timestamp=(1, ts))  # fmt: skip


def test_a_keyed_task_files_records_from_the_future_at_the_allowance_and_moves_no_watermark(
    monkeypatch, tmp_path
):
    """200 records each stamped in a Dedup slice of its own far ahead, between genuine records
    five minutes behind the clock: the watermark follows the genuine ones alone, and the
    ahead ones are processed at wall time plus the allowance, so the id filter holds a
    generation or two, not 200."""
    io = _future_io(monkeypatch)
    task = KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))
    [inp] = task.inputs
    before = now_ms()
    genuine = [_stamped(i, before - 300_000 + i) for i in range(5)]
    ahead = [_stamped(5 + i, before + (i + 1) * 3_600_000) for i in range(200)]
    task.handle_run(genuine + ahead[:100], inp)
    task.handle_run(ahead[100:], inp)
    after = now_ms()
    assert inp.position == 205
    assert inp.watermark.value() == (before - 300_000 + 4 - 2_000, False)
    assert task.executor.ids.filter.slices <= 2, task.executor.ids.filter.slices
    stamps = [json.loads(p[2])["ts"] for p in _sent(io) if p[0] == "out"]
    assert stamps[:5] == [before - 300_000 + i for i in range(5)]
    assert all(before + 300_000 <= ts <= after + 300_000 for ts in stamps[5:])
    assert len(stamps) == 205


def test_the_re_keying_task_writes_a_record_from_the_future_at_the_allowance(monkeypatch):
    io = _future_io(monkeypatch, key=key_by("user"))
    task = RepartitionTask(io, io.spec.inputs[0], 0)
    [inp] = task.inputs
    before = now_ms()
    task.handle_run([_stamped(0, before - 1_000), _stamped(1, before + 3_000_000)], inp)
    after = now_ms()
    stamps = [p[4] for p in _sent(io) if p[0] == io.spec.by_key("in")]
    assert stamps[0] == before - 1_000 and before + 300_000 <= stamps[1] <= after + 300_000
    assert inp.watermark.value() == (before - 3_000, False)


def test_under_on_future_dead_letter_neither_task_processes_it(monkeypatch, tmp_path):
    for key in (None, key_by("user")):
        io = _future_io(monkeypatch, key=key, on_future="dead_letter")
        if key is None:
            task = KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))
        else:
            task = RepartitionTask(io, io.spec.inputs[0], 0)
        [inp] = task.inputs
        task.handle_run([_stamped(0, now_ms() + 3_000_000), _stamped(1, now_ms())], inp)
        sent = _sent(io)
        [dead] = [p for p in sent if p[0] == io.spec.dlq]
        assert dict(dead[5])["logwheel.error.stage"] == b"future" and inp.position == 2
        assert len([p for p in sent if p[0] in ("out", io.spec.by_key("in"))]) == 1


def test_a_keyed_task_runs_replayed_records_behind_its_watermark_and_names_them_if_they_fail(
    monkeypatch, tmp_path
):
    io = _io(monkeypatch)
    task = KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))
    [inp] = task.inputs
    assert task.partitions() == [inp, task.replays]
    task.executor.advance_watermark(5_000)
    before = task.input_watermark()
    named = [("logwheel.replay.stream", b"in"), ("logwheel.replay.of", b"dl.c.dlq/0/7")]

    def replayed(offset: int, value: bytes, headers=named) -> Message:
        headers = [("logwheel.id", b"in/0/3"), *headers]
        return Message(topic=io.spec.replay, partition=0, offset=offset, key=b"ann", value=value,
                       timestamp=(1, 1_000), headers=headers)  # fmt: skip

    ok, again = replayed(0, b'{"user": "ann"}'), replayed(1, b'{"user": "ann", "boom": true}')
    stray = replayed(2, b"{}", [("logwheel.replay.stream", b"nowhere")])
    task.handle_run([ok, again, stray], task.replays)
    assert task.replays.position == 3 and task.input_watermark() == before
    out, dead, unknown = _sent(io)
    assert (out[0], out[4]) == ("out", 1_000)  # processed at its old time: not late
    assert task.executor.late_records == 0
    assert _told(dead)[1:3] == (b"process_record", io.spec.replay.encode())
    assert dict(dead[5])["logwheel.replay.of"] == b"dl.c.dlq/0/7"  # what it replays, kept
    assert dict(dead[5])["logwheel.replay.stream"] == b"in"
    assert dict(unknown[5])["logwheel.error.stage"] == b"replay"
