"""The dead-man switch's bookkeeping: the dump a previous process left, read and forgotten;
arming empties it; re-arming is spared when the last arming is recent; nothing is armed
outside arm..disarm. faulthandler's timer is a stand-in here (armed for real it would end the
test run); the switch ending a real process: tests/unit/streaming/test_watchdog.py."""

from __future__ import annotations

import faulthandler
import stat

import pytest

from framework.streaming.dead_man import DUMP, DeadMan


class Timer:
    """faulthandler's dump_traceback_later and its cancel, written down."""

    def __init__(self) -> None:
        self.armed: list[float] = []  # the delay of each arming
        self.cancelled = 0

    def later(self, timeout, repeat=False, file=None, exit=False):
        assert exit and file is not None and not file.closed
        self.armed.append(timeout)

    def cancel(self):
        self.cancelled += 1


@pytest.fixture
def timer(monkeypatch) -> Timer:
    stand_in = Timer()
    monkeypatch.setattr(faulthandler, "dump_traceback_later", stand_in.later)
    monkeypatch.setattr(faulthandler, "cancel_dump_traceback_later", stand_in.cancel)
    return stand_in


def test_no_dump_or_an_empty_one_tells_of_no_previous_death(tmp_path):
    switch = DeadMan(tmp_path, 8.0)
    assert switch.previous() is None
    (tmp_path / DUMP).write_text("")
    assert switch.previous() is None
    (tmp_path / DUMP).write_bytes(b"Timeout (0:00:08)!\nThread \xff\n")
    assert switch.previous() == "Timeout (0:00:08)!\nThread \ufffd\n"


def test_forgetting_empties_the_dump_and_makes_none_where_there_was_none(tmp_path):
    switch = DeadMan(tmp_path, 8.0)
    switch.forget()
    assert not (tmp_path / DUMP).exists()
    (tmp_path / DUMP).write_text("Timeout (0:00:08)!\n")
    switch.forget()
    assert (tmp_path / DUMP).read_text() == "" and switch.previous() is None


def test_arming_makes_the_dump_a_private_file(tmp_path, timer):
    switch = DeadMan(tmp_path, 8.0)
    switch.arm(100.0)
    assert timer.armed == [8.0]
    assert stat.S_IMODE((tmp_path / DUMP).stat().st_mode) == 0o600
    switch.disarm()


def test_arming_empties_the_previous_dump(tmp_path, timer):
    (tmp_path / DUMP).write_text("Timeout (0:00:08)!\n")
    switch = DeadMan(tmp_path, 8.0)
    switch.arm(100.0)
    assert (tmp_path / DUMP).read_text() == "" and switch.previous() is None
    switch.disarm()


def test_rearming_within_a_quarter_of_the_delay_of_the_last_arming_arms_nothing(tmp_path, timer):
    switch = DeadMan(tmp_path, 8.0)
    switch.arm(100.0)
    switch.rearm(101.9)  # 2 s is a quarter of 8
    assert timer.armed == [8.0]
    switch.rearm(102.0)
    switch.rearm(103.0)  # counted from the last arming, at 102
    assert timer.armed == [8.0, 8.0]
    switch.rearm(104.0)
    assert timer.armed == [8.0, 8.0, 8.0]
    switch.disarm()


def test_arming_again_arms_at_once_whenever_the_last_arming_was(tmp_path, timer):
    switch = DeadMan(tmp_path, 8.0)
    switch.arm(100.0)
    switch.disarm()
    switch.arm(100.5)
    assert timer.armed == [8.0, 8.0]
    switch.disarm()


def test_nothing_is_armed_before_arming_or_after_disarming(tmp_path, timer):
    switch = DeadMan(tmp_path, 8.0)
    switch.rearm(100.0)
    switch.disarm()
    assert timer.armed == [] and timer.cancelled == 0
    switch.arm(200.0)
    switch.disarm()
    assert timer.cancelled == 1
    switch.rearm(300.0)
    switch.disarm()
    assert timer.armed == [8.0] and timer.cancelled == 1
