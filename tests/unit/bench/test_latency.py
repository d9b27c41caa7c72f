"""bench/latency.py's sender: a record whose send failed is left out of the check, and the run
says how many; a record delivered is never left out."""

from __future__ import annotations

from bench import latency


def test_only_a_failed_delivery_is_left_out_and_the_run_says_so() -> None:
    sender = latency.Sender.__new__(latency.Sender)  # no producer: only its bookkeeping
    sender.undelivered = {}
    sender._delivered(4, None)
    sender._delivered(5, "Local: Message timed out")
    assert sender.undelivered == {5: "Local: Message timed out"}
    wrong = {"sent": 9, "undelivered": 1, "missing": 1, "examples": ["missing x"]}
    assert latency.describe(wrong).startswith("9 sent, 1 the sender could not deliver left out")
    right = {"sent": 9, "missing": 1, "examples": ["missing x"]}
    assert latency.describe(right).startswith("9 sent: WRONG: ")
