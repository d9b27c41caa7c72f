"""`dlq ls`'s counting, on dead letters as the broker would hand them."""

from __future__ import annotations

from framework.ops.dead_letter_counts import ReasonCount, summarize
from framework.ops.dead_letter_log import DeadLetter


class Msg:
    """A dead-letter topic's record, as confluent-kafka's Message gives it."""

    def __init__(self, offset: int, stage: str, reason: str, source: str = "in", replays=None):
        self._offset = offset
        self._headers = [
            ("logwheel.error", reason.encode()),
            ("logwheel.error.stage", stage.encode()),
            ("logwheel.source.topic", source.encode()),
            ("logwheel.source.partition", b"1" if source else b""),
            ("logwheel.source.offset", str(offset * 10).encode() if source else b""),
            ("user-header", b"kept"),
        ]
        if replays:
            self._headers.append(("logwheel.replay.of", replays.encode()))

    def topic(self):
        return "p.c.dlq"

    def partition(self):
        return 0

    def offset(self):
        return self._offset

    def key(self):
        return b"k"

    def value(self):
        return b"{}"

    def timestamp(self):
        return (1, 1000 + self._offset)

    def headers(self):
        return self._headers


def letters() -> list[DeadLetter]:
    return [
        DeadLetter.of(Msg(0, "process_record", "ValueError: x")),
        DeadLetter.of(Msg(1, "decode", "JSONDecodeError: y")),
        DeadLetter.of(Msg(2, "process_record", "ValueError: x")),
        DeadLetter.of(Msg(3, "timeout", "TimedOut: z", source="")),
        DeadLetter.of(
            Msg(4, "process_record", "ValueError: x", source="p.c.replay", replays="p.c.dlq/0/0")
        ),
    ]


def test_a_dead_letter_is_read_from_its_headers():
    first, *_, timer, again = letters()
    assert (first.ident, first.stage, first.reason) == (
        "p.c.dlq/0/0",
        "process_record",
        "ValueError: x",
    )
    assert (first.source_topic, first.source_partition, first.source_offset) == ("in", 1, 0)
    assert (timer.source_topic, timer.source_partition, timer.source_offset) == ("", None, None)
    assert again.replays == "p.c.dlq/0/0" and first.replays is None
    assert not first.truncated


def test_counts_by_stage_and_reason_with_the_replayed_and_the_newest():
    summary = summarize("c", "p.c.dlq", letters(), {"p.c.dlq/0/0": {}, "p.c.dlq/0/1": {}}, newest=2)
    assert (summary.total, summary.replayed) == (5, 2)
    assert summary.stages == {"decode": 1, "process_record": 3, "timeout": 1}
    assert summary.reasons == [
        ReasonCount("process_record", "ValueError: x", 3, 1),
        ReasonCount("decode", "JSONDecodeError: y", 1, 1),
        ReasonCount("timeout", "TimedOut: z", 1, 0),
    ]
    assert [d["dead_letter"] for d in summary.newest] == ["p.c.dlq/0/4", "p.c.dlq/0/3"]
    newest = summary.newest[0]
    assert newest["replays"] == "p.c.dlq/0/0" and newest["replayed"] is False
    assert (newest["source_topic"], newest["source_partition"], newest["source_offset"]) == (
        "p.c.replay", 1, 40,
    )  # fmt: skip
    assert summary.as_json()["reasons"][0] == {
        "stage": "process_record", "reason": "ValueError: x", "count": 3, "replayed": 1,
    }  # fmt: skip


def test_no_dead_letters_count_zero():
    summary = summarize("c", "p.c.dlq", [], {})
    assert (summary.total, summary.replayed, summary.stages, summary.newest) == (0, 0, {}, [])
