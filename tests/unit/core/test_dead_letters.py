"""The error policy of a computation, one place for every runtime: dead-letter, skip or stop,
always counted, the reason naming the error's class."""

from __future__ import annotations

import pytest

from framework.core.dead_letters import ErrorPolicy, reason_class, reason_of
from framework.core.metrics import DEAD_LETTERS
from framework.errors import BadRecord, Fatal
from framework.serde.codecs import DecodeError


def _count(computation: str, stage: str, kind: str) -> float:
    return DEAD_LETTERS.labels(computation, stage, kind)._value.get()


def test_the_reason_names_the_underlying_error():
    cause = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    wrapped = BadRecord("decode", "key is not UTF-8", cause)
    assert reason_of(wrapped) == "UnicodeDecodeError: key is not UTF-8"
    assert reason_class(wrapped) == "UnicodeDecodeError"
    assert reason_of(DecodeError("truncated body")) == "DecodeError: truncated body"
    assert reason_of(ValueError("boom")) == "ValueError: boom"


@pytest.mark.parametrize(("policy", "written"), [("dead_letter", True), ("skip", False)])
def test_dead_letter_writes_and_skip_drops_and_both_count(policy, written):
    before = _count(f"p.{policy}", "process_record", "ValueError")
    admitted = ErrorPolicy(f"p.{policy}", policy).admit("process_record", ValueError("x"))
    assert admitted is written
    assert _count(f"p.{policy}", "process_record", "ValueError") == before + 1


def test_stop_ends_the_process_naming_stage_reason_and_fix():
    with pytest.raises(Fatal, match=r"stage 'key' \(KeyError: 'user'\).*on_error='dead_letter'"):
        ErrorPolicy("p.stop", "stop").admit("key", KeyError("user"))


@pytest.mark.parametrize("policy", ["dead_letter", "skip", "stop"])
def test_a_late_record_follows_on_late_whatever_the_error_policy(policy):
    """on_late="dead_letter" already chose to write it; lateness never stops a job."""
    from framework.errors import LateRecord

    before = _count(f"late.{policy}", "late", "LateRecord")
    assert ErrorPolicy(f"late.{policy}", policy).admit("late", LateRecord("behind"))
    assert _count(f"late.{policy}", "late", "LateRecord") == before + 1
