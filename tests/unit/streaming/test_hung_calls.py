"""The hook calls the watchdog abandoned, remembered in the state directory: a call's identity
and how a log line names it, the bound on how many are kept, which are forgotten as their
partitions' positions pass them or their timers are settled, and which entries of the file
are trusted when it is read again. (Persistence across instances and a broken file:
tests/unit/streaming/test_watchdog.py.)"""

from __future__ import annotations

import json

from confluent_kafka import Message

from framework.core.api import Timer
from framework.streaming import hung_calls
from framework.streaming.hung_calls import FILE, HungCalls, call_of, describe


def test_a_message_is_a_record_call_and_a_key_timer_pair_a_timer_call():
    msg = Message(topic="in", partition=3, offset=41, value=b"")
    assert call_of(msg) == ("record", "in", 3, 41)
    assert call_of(("k", Timer(7, "tag", "processing"))) == ("timer", "k", "tag", 7, "processing")


def test_a_call_is_described_by_where_it_was_read_or_by_its_timer():
    assert describe(("record", "in", 3, 41)) == "record in[3]@41"
    assert describe(("timer", "k", "t", 7, "event")) == "timer 't' of key 'k' at 7 (event time)"


def test_a_call_added_is_remembered_and_on_disk_before_add_returns(tmp_path):
    hung = HungCalls(tmp_path)
    assert not hung
    hung.add(("record", "in", 0, 5), "stuck")
    assert hung and ("record", "in", 0, 5) in hung and ("record", "in", 0, 6) not in hung
    on_disk = json.loads((tmp_path / FILE).read_text())
    assert on_disk == [{"call": ["record", "in", 0, 5], "reason": "stuck"}]


def test_past_the_bound_the_oldest_calls_are_forgotten_in_memory_and_on_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(hung_calls, "MAX_CALLS", 3)
    hung = HungCalls(tmp_path)
    for offset in range(5):
        hung.add(("record", "in", 0, offset), f"r{offset}")
    kept = {("in", 0, 2): "r2", ("in", 0, 3): "r3", ("in", 0, 4): "r4"}
    assert hung.records() == kept
    assert HungCalls(tmp_path).records() == kept


def test_records_below_their_partitions_position_are_forgotten_and_the_rest_kept(tmp_path):
    hung = HungCalls(tmp_path)
    hung.add(("record", "in", 0, 4), "passed")
    hung.add(("record", "in", 0, 5), "at the position: not passed yet")
    hung.add(("record", "in", 1, 2), "another partition, not passed")
    hung.add(("record", "other", 0, 1), "a partition with no position")
    hung.add(("timer", "k", "t", 3, "event"), "a timer has no position")
    hung.passed({("in", 0): 5, ("in", 1): 2})
    assert HungCalls(tmp_path).records() == {
        ("in", 0, 5): "at the position: not passed yet",
        ("in", 1, 2): "another partition, not passed",
        ("other", 0, 1): "a partition with no position",
    }
    assert hung.timers() == {("k", "t", "event"): "a timer has no position"}


def test_a_timer_is_settled_whatever_time_it_was_remembered_at_and_only_in_its_domain(tmp_path):
    hung = HungCalls(tmp_path)
    hung.add(("timer", "k", "t", 3, "event"), "a")
    hung.add(("timer", "k", "t", 9, "event"), "b")  # set again later: the same timer
    hung.add(("timer", "k", "t", 3, "processing"), "c")
    hung.add(("timer", "j", "t", 3, "event"), "d")
    hung.settle_timer("k", "t", "event")
    assert HungCalls(tmp_path).timers() == {("k", "t", "processing"): "c", ("j", "t", "event"): "d"}


def test_settling_calls_not_remembered_does_not_write_the_file(tmp_path):
    hung = HungCalls(tmp_path)
    hung.add(("record", "in", 0, 5), "r")
    (tmp_path / FILE).unlink()
    hung.settle([("record", "in", 0, 6)])
    hung.passed({("in", 0): 3})
    assert not (tmp_path / FILE).exists()
    hung.settle([("record", "in", 0, 5)])
    assert json.loads((tmp_path / FILE).read_text()) == []


def test_a_file_is_read_entry_by_entry_keeping_only_well_shaped_calls(tmp_path, caplog):
    entries = [
        {"call": ["record", "in", 0, 5], "reason": "kept"},
        {"call": ["record", "in", True, 5], "reason": "a bool is no partition"},
        {"call": ["record", "in", 0, 5.0], "reason": "a float is no offset"},
        {"call": ["record", "in", 0, 6], "reason": 7},
        {"call": ["timer", "k", "t", 3, "event"], "reason": "kept too"},
        {"call": ["timer", "k", "t", "3", "event"], "reason": "a time is a number"},
        {"call": ["timer", "k", 1, 3, "event"], "reason": "a tag is text"},
        {"call": ["timer", "k", "t", 3], "reason": "no domain"},
        {"call": "record in 0 5", "reason": "not a list"},
    ]
    (tmp_path / FILE).write_text(json.dumps(entries))
    with caplog.at_level("WARNING"):
        hung = HungCalls(tmp_path)
    assert hung.records() == {("in", 0, 5): "kept"}
    assert hung.timers() == {("k", "t", "event"): "kept too"}
    assert caplog.text == ""  # shapes dropped quietly: only an unreadable file is warned of


def test_a_missing_file_is_no_call_and_no_warning(tmp_path, caplog):
    with caplog.at_level("WARNING"):
        assert not HungCalls(tmp_path / "nowhere")
    assert caplog.text == ""


def test_a_file_of_another_shape_is_ignored_with_a_warning(tmp_path, caplog):
    (tmp_path / FILE).write_text(json.dumps({"call": ["record", "in", 0, 5], "reason": "r"}))
    with caplog.at_level("WARNING"):
        assert not HungCalls(tmp_path)
    assert "cannot be read" in caplog.text
