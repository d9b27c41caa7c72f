"""A dead-letter topic's records and the `.replayed` topic, as `logwheel dlq` reads them: what
a dead letter's headers say (and what it is when they say nothing, or nonsense), how `dlq ls`
shows one, which topic is a computation's or a sink's, and what was sent back once the
`.replayed` topic's tombstones are folded in. Reading Kafka (`read_committed`) is left to the
integration tests: here it hands over messages made in the test. (Decoding of well-formed
dead letters: tests/unit/ops/test_dead_letter_counts.py.)"""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from framework.core.pipeline import PipelineError
from framework.ops import dead_letter_log
from framework.ops.dead_letter_log import (
    DeadLetter,
    read_dead_letters,
    read_replayed,
)


def _letter(headers, key: bytes | None = b"k", offset: int = 9) -> DeadLetter:
    msg = Message(
        topic="p.c.dlq",
        partition=1,
        offset=offset,
        key=key,
        value=b"{}",
        headers=headers,
        timestamp=(1, 1234),
    )
    return DeadLetter.of(msg)


def test_a_dead_letter_without_error_headers_is_of_an_unknown_stage_and_read_from_nowhere():
    for headers in (None, [("user-header", b"x")], [("logwheel.error.stage", b"")]):
        letter = _letter(headers)
        assert (letter.stage, letter.reason, letter.replays) == ("unknown", "", None)
        assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
            "",
            None,
            None,
        )


def test_a_source_partition_or_offset_that_is_no_number_is_none():
    letter = _letter(
        [
            ("logwheel.source.topic", b"in"),
            ("logwheel.source.partition", b"two"),
            ("logwheel.source.offset", b"\xff"),
        ]
    )
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        "in",
        None,
        None,
    )


def test_a_dead_letter_keeps_every_header_it_came_with():
    headers = [("logwheel.error", b"ValueError: x"), ("trace", b"abc"), ("trace", None)]
    assert _letter(headers).headers == tuple(headers)


def test_a_dead_letter_whose_value_was_cut_is_truncated():
    assert _letter([("logwheel.error.truncated", b"1048576")]).truncated
    assert not _letter([("logwheel.error", b"ValueError: x")]).truncated


def test_dlq_ls_shows_a_dead_letter_by_its_name_with_its_key_as_text():
    letter = _letter(
        [
            ("logwheel.error", b"ValueError: x"),
            ("logwheel.error.stage", b"process_record"),
            ("logwheel.source.topic", b"in"),
            ("logwheel.source.partition", b"3"),
            ("logwheel.source.offset", b"41"),
            ("logwheel.replay.of", b"p.c.dlq/1/2"),
        ],
        key=b"k\xff",
    )
    assert letter.describe() == {
        "dead_letter": "p.c.dlq/1/9",
        "timestamp": 1234,
        "key": "k\ufffd",
        "stage": "process_record",
        "reason": "ValueError: x",
        "source_topic": "in",
        "source_partition": 3,
        "source_offset": 41,
        "replays": "p.c.dlq/1/2",
    }
    assert _letter(None, key=None).describe()["key"] is None


def _committed(monkeypatch, msgs: list[Message] | None) -> list[str]:
    """`read_committed` handing over `msgs` (None: no such topic); the topics asked for."""
    asked: list[str] = []

    def read_committed(bootstrap, topic, kafka=None, timeout=None):
        asked.append(topic)
        return msgs

    monkeypatch.setattr(dead_letter_log, "read_committed", read_committed)
    return asked


def test_a_missing_dead_letter_topic_is_refused_naming_the_fix_unless_it_may_be_missing(
    monkeypatch,
):
    _committed(monkeypatch, None)
    with pytest.raises(PipelineError, match="no dead-letter topic p.c.dlq: name a computation"):
        read_dead_letters("127.0.0.1:1", "p.c.dlq")
    assert read_dead_letters("127.0.0.1:1", "p.c.dlq", must_exist=False) == []


def test_dead_letters_are_read_in_the_order_committed(monkeypatch):
    msgs = [
        Message(topic="p.c.dlq", partition=0, offset=o, value=b"", timestamp=(1, o)) for o in (3, 4)
    ]
    asked = _committed(monkeypatch, msgs)
    letters = read_dead_letters("127.0.0.1:1", "p.c.dlq")
    assert [letter.ident for letter in letters] == ["p.c.dlq/0/3", "p.c.dlq/0/4"]
    assert asked == ["p.c.dlq"]


def _replayed(key: bytes | None, value: bytes | None) -> Message:
    return Message(topic="p.c.replayed", partition=0, offset=0, key=key, value=value)


def test_what_was_sent_back_is_the_last_word_on_each_dead_letter_a_tombstone_unsaying_it(
    monkeypatch,
):
    _committed(
        monkeypatch,
        [
            _replayed(b"p.c.dlq/0/1", b'{"to": "in", "at": 1}'),
            _replayed(b"p.c.dlq/0/2", b'{"to": "in", "at": 2}'),
            _replayed(b"p.c.dlq/0/1", None),  # a tombstone: no longer sent back
            _replayed(b"p.c.dlq/0/3", None),  # a tombstone of nothing
            _replayed(b"p.c.dlq/0/2", b'{"to": "in", "at": 5}'),  # sent back again
            _replayed(b"p.c.dlq/0/4", b'{"to": "in", "at": 4}'),
            _replayed(b"p.c.dlq/0/4", None),
            _replayed(b"p.c.dlq/0/4", b"{}"),  # and once more, after its tombstone
        ],
    )
    assert read_replayed("127.0.0.1:1", "p.c.replayed") == {
        "p.c.dlq/0/2": {"to": "in", "at": 5},
        "p.c.dlq/0/4": {},
    }


def test_a_replayed_record_without_a_key_is_skipped_and_one_that_is_no_json_still_counts(
    monkeypatch,
):
    _committed(
        monkeypatch,
        [_replayed(None, b'{"to": "in"}'), _replayed(b"p.c.dlq/0/1", b"not json")],
    )
    assert read_replayed("127.0.0.1:1", "p.c.replayed") == {"p.c.dlq/0/1": {}}


def test_no_replayed_topic_is_nothing_sent_back(monkeypatch):
    _committed(monkeypatch, None)
    assert read_replayed("127.0.0.1:1", "p.c.replayed") == {}
