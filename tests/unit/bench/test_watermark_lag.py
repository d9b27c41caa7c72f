"""bench/watermark_lag.py's check: the window counts each stage must write, by its watermark."""

from __future__ import annotations

import collections

from bench import verify, watermark_lag

W = watermark_lag.WINDOW_MS


def test_the_reference_counts_each_stage_s_windows_by_its_own_key() -> None:
    stamps = [0, 10, W + 5]  # seq 0 and 1 in the first window, seq 2 in the second
    expected = watermark_lag.reference(stamps, "different")
    fields = [watermark_lag.fields(seq) for seq in range(3)]
    assert ("stage1", str(fields[0]["a"]), 0, 1) in expected  # a: 0 and 1 differ
    assert ("stage2", str(fields[1]["b"]), 0, 1) in expected
    assert ("stage3", str(fields[2]["c"]), W, 1) in expected
    assert len(expected) == 9
    same = watermark_lag.reference(stamps, "same")
    assert {w[1] for w in same if w[0] == "stage3"} == {str(f["a"]) for f in fields}


def test_a_window_the_watermark_passed_must_be_written_once_with_its_count() -> None:
    expected = watermark_lag.reference([0, W, 2 * W], "different")
    closed = {w for w in expected if w[2] + W <= 2 * W}  # the first two windows of each stage
    lows = dict.fromkeys(watermark_lag.STAGES, 2 * W)
    check = watermark_lag.check_windows(expected, collections.Counter(closed), lows)
    assert verify.passed(check) and check["windows_required"] == dict.fromkeys(lows, 2)
    later = collections.Counter(expected)  # the third window too: closed before the stop
    assert verify.passed(watermark_lag.check_windows(expected, later, lows))
    wrong = collections.Counter(closed)
    first = min(closed)
    wrong.pop(first)
    wrong[first[:3] + (first[3] + 1,)] += 1  # a wrong count
    wrong[max(closed)] += 1  # written twice
    check = watermark_lag.check_windows(expected, wrong, lows)
    assert (check["missing"], check["unexpected"], check["duplicated"]) == (1, 1, 1)


def test_a_stage_s_final_low_watermark_is_its_slowest_task_s_highest_mark() -> None:
    marks = collections.Counter({("s/task/0", 5): 1, ("s/task/0", 9): 1, ("s/task/1", 7): 1})
    assert watermark_lag.low(marks, ["s/task/0", "s/task/1"]) == 7
    assert watermark_lag.low(marks, ["s/task/0", "s/task/2"]) == -1  # one never published
