"""One Spark task of a backfill, without Spark or a broker (the rows as Spark hands them over, a
collector over a fake producer): the streaming side's re-keying rule, and its dead letters,
which take the streaming path — the source record's bytes and headers, its reason and stage.
On Spark and Kafka: tests/integration/test_backfill*.py."""

from __future__ import annotations

import dataclasses

import pytest

from framework.backfill.task import BAD, RECORD, TaskSettings, _TaskRun, route
from framework.core.api import MIN_TIME, Computation
from framework.core.dead_letters import reason_of
from framework.core.pipeline import BoundedOutOfOrderness, Pipeline, key_by
from framework.errors import BadRecord
from framework.kafka.limits import TopicLimits
from framework.kafka.rekeying import rekey
from framework.kafka.stream_codecs import stream_decoder
from tests.unit.kafka.fakes import fake_collector


class Count(Computation):
    def process_record(self, ctx, record):
        if record.value.get("boom"):
            raise RuntimeError("boom")
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.produce("out", {"user": ctx.key, "n": ctx.state["n"]})


PIPELINE = (
    Pipeline("bf", partitions=2)
    .source("in")
    .computation("c", Count, inputs={"in": key_by("user")}, outputs={"out": None})
)
SPEC = PIPELINE["c"]


def routed(value: bytes, headers=()) -> tuple:
    return route(PIPELINE, None, SPEC, "in", 1, 7, b"kk", value, 5, list(headers))


def test_a_record_is_routed_to_the_key_its_extractor_gives():
    assert routed(b'{"user": "ann"}') == ("ann", None, None, None)
    assert routed(bytearray(b'{"user": "ann"}')) == ("ann", None, None, None)  # Spark's binary


def test_a_record_the_re_keying_rule_refuses_is_routed_to_its_stage_and_reason():
    key, stage, kind, message = routed(b"not json")
    assert (key, stage, kind) == (None, "decode", "DecodeError")
    key, stage, kind, message = routed(b'{"other": 1}')
    assert (key, stage, kind) == (None, "key", "KeyError") and "'user'" in message
    # the reason a task gives the dead letter of such a row is the streaming side's
    decode = stream_decoder(PIPELINE, "in")
    with pytest.raises(BadRecord) as streamed:
        rekey(SPEC.inputs[0], SPEC.by_key("in"), TopicLimits(), decode, b"kk", b'{"other": 1}',
              5, [], "in/1/", 7)  # fmt: skip
    assert f"{kind}: {message}" == reason_of(streamed.value)


def row(kind: int, key: str, offset: int, value: bytes, headers=(), bad=(None, None, None)):
    """A task's row (`task.COLUMNS`) of partition 1 of stream "in", re-keyed."""
    return (kind, key, 100 + offset, "in", 1, offset, b"kk", value, list(headers), "in", False,
            *bad)  # fmt: skip


def run(monkeypatch, rows: list, on_error: str = "dead_letter") -> tuple[dict, list]:
    spec = dataclasses.replace(SPEC, on_error=on_error)
    settings = TaskSettings(PIPELINE, spec, "plan", "", {}, None, "bf.backfill", MIN_TIME, None, 0)
    collector = fake_collector(monkeypatch)
    summary = _TaskRun(settings, collector).run(iter(rows))
    collector.flush()
    return summary, collector.producer.produced


def headers_of(produced: tuple) -> dict:
    return dict(produced[5])


def test_bad_rows_undecodable_records_and_failing_hooks_are_dead_letters_of_their_source(
    monkeypatch,
):
    trace = [("trace", b"t1"), ("logwheel.error", b"forged")]
    rows = [
        row(RECORD, "ann", 0, b'{"user": "ann"}'),
        row(BAD, "", 1, b'{"other": 1}', trace, ("key", "KeyError", "'user'")),
        row(RECORD, "bob", 2, b"garbage", trace),
        row(RECORD, "ann", 3, b'{"user": "ann", "boom": true}', trace),
        row(RECORD, "ann", 4, b'{"user": "ann"}'),
    ]
    summary, produced = run(monkeypatch, rows)
    assert (summary["records_in"], summary["dead_letters"], summary["keys"]) == (5, 3, 1)
    outputs = [p for p in produced if p[0] == "out"]
    assert [p[1] for p in outputs] == [b"ann", b"ann"]
    dead = [p for p in produced if p[0] == SPEC.dlq]
    assert [(p[1], p[2], p[4]) for p in dead] == [
        (b"kk", b'{"other": 1}', 101),
        (b"kk", b"garbage", 102),
        (b"kk", b'{"user": "ann", "boom": true}', 103),
    ]
    for p in dead:  # the record's own header of that name is not kept
        assert [name for name, _ in p[5]].count("logwheel.error") == 1
    told = [headers_of(p) for p in dead]
    assert [h["logwheel.error.stage"] for h in told] == [b"key", b"decode", b"process_record"]
    assert told[0]["logwheel.error"] == b"KeyError: 'user'"
    assert told[2]["logwheel.error"] == b"RuntimeError: boom"
    for offset, h in enumerate(told, start=1):
        where = (h["logwheel.source.topic"], h["logwheel.source.partition"])
        assert where == (b"in", b"1") and h["logwheel.source.offset"] == str(offset).encode()
        assert h["trace"] == b"t1"


def test_under_on_error_skip_bad_records_are_counted_and_not_written(monkeypatch):
    rows = [row(RECORD, "bob", 0, b"garbage"), row(BAD, "", 1, b"{}", (), ("key", "E", "e"))]
    summary, produced = run(monkeypatch, rows, "skip")
    assert summary["dead_letters"] == 2 and produced == []


def test_a_record_stamped_beyond_the_allowance_is_filed_as_streaming_files_it(monkeypatch):
    """Judged against the plan's wall time, so every attempt of a task judges alike: processed
    at wall time plus the allowance (moving the watermark no further than that), or
    dead-lettered at stage "future" under on_future="dead_letter"."""
    wall = 1_700_000_000_000
    for on_future in ("count", "dead_letter"):
        pipeline = Pipeline("bf", partitions=2).source(
            "in", watermark=BoundedOutOfOrderness(ms=0, max_future_ms=1_000, on_future=on_future)
        )
        pipeline.computation("c", Count, inputs={"in": key_by("user")}, outputs={"out": None})
        settings = TaskSettings(pipeline, pipeline["c"], "plan", "", {}, None, "bf.backfill",
                                MIN_TIME, 2**62, 0, wall=wall)  # fmt: skip
        collector = fake_collector(monkeypatch)
        rows = [
            row(RECORD, "ann", 0, b'{"user": "ann"}'),
            row(RECORD, "ann", 1, b'{"user": "ann"}'),
        ]
        rows[0] = (*rows[0][:2], wall + 1_000, *rows[0][3:])  # at the limit: its own time
        rows[1] = (*rows[1][:2], wall + 3_000_000, *rows[1][3:])
        summary = _TaskRun(settings, collector).run(iter(rows))
        collector.flush()
        produced = collector.producer.produced
        out = [p[4] for p in produced if p[0] == "out"]
        dead = [p for p in produced if p[0] == pipeline["c"].dlq]
        if on_future == "count":
            assert out == [wall + 1_000, wall + 1_000] and not dead
        else:
            assert out == [wall + 1_000] and summary["dead_letters"] == 1
            assert (dead[0][4], headers_of(dead[0])["logwheel.error.stage"]) == (
                wall + 3_000_000,
                b"future",
            )
