"""bench/verify.py: the check every benchmark makes before it prints a figure."""

from __future__ import annotations

import collections

from bench import verify


def test_matching_outputs_pass() -> None:
    expected = collections.Counter({("a", 1): 1, ("b", None): 2})  # the bare loop's two copies
    check = verify.compare(expected, collections.Counter(expected))
    assert {k: check[k] for k in verify.COUNTS} == dict.fromkeys(verify.COUNTS, 0)
    assert verify.passed(check) and verify.describe(check).startswith("checked: 0 missing")


def test_a_missing_an_unexpected_a_duplicated_and_a_late_output_are_each_counted() -> None:
    expected = {("a", 1), ("a", 2), ("b", 1), ("c", 1)}
    written = collections.Counter({("a", 1): 1, ("a", 3): 1, ("b", 1): 3})  # ("a", 2) counted 3
    check = verify.compare(expected, written)
    assert (check["missing"], check["unexpected"], check["duplicated"]) == (2, 1, 2)
    assert check["late"] == 0
    assert "missing ('a', 2)" in check["examples"] and "unexpected ('a', 3)" in check["examples"]
    assert "('b', 1) written 3 times" in check["examples"]
    # two outputs were not readable when the time was taken; both came afterwards
    late = verify.compare(expected, collections.Counter(expected), short_at_end=2)
    assert late["late"] == 2 and not verify.passed(late)


def test_a_copy_beyond_the_copies_expected_is_a_duplicate() -> None:
    expected = collections.Counter({("w", None): 2})
    assert verify.compare(expected, collections.Counter({("w", None): 3}))["duplicated"] == 1
    assert verify.compare(expected, collections.Counter({("w", None): 1}))["missing"] == 1


def test_a_row_fails_on_its_worst_run_and_the_exit_code_says_so(capsys) -> None:
    good = verify.compare({1, 2}, collections.Counter({1: 1, 2: 1}))
    bad = verify.compare({1, 2}, collections.Counter({1: 1, 2: 2}))
    row = {"contender": "x", **verify.worst([good, bad])}
    assert row["duplicated"] == 1
    lines = verify.failures([row, {"contender": "y", **good}])
    assert lines == [
        "FAILED: x: WRONG: 0 missing, 0 unexpected, 1 duplicated, 0 late (e.g. 2 written 2 times)"
    ]
    assert verify.report(lines) == 1 and "FAILED: x" in capsys.readouterr().out
    assert verify.report([]) == 0
