"""What a rescale's views decide without Spark (framework/rescale/views.py): the offsets a view
reads, which topics hold a copy of the keyed data, and the verdict a verification gives and
prints. Reading topics into a view and checksumming it run on Spark in
tests/integration/test_rescale.py."""

from __future__ import annotations

from framework.rescale.views import ID, PENDING, STATE, TIMER, Topics, Verification, ranges_of

COUNTS = {STATE: 3, TIMER: 1, ID: 0, PENDING: 2}


def verification(**changes) -> Verification:
    fields = {"keys": 3, "counts": dict(COUNTS), "new_counts": dict(COUNTS), "mismatched": 0,
              "misplaced": 0, "examples": []}  # fmt: skip
    return Verification(**{**fields, **changes})


def test_ends_become_offsets_by_topic_then_partition():
    ends = [("a", 0, 0, 10), ("b", 1, 5, 5), ("a", 2, 3, 7)]
    assert ranges_of(ends) == {"a": {0: (0, 10), 2: (3, 7)}, "b": {1: (5, 5)}}
    assert ranges_of([]) == {}


def test_the_ids_journal_is_one_of_the_topics_only_when_the_computation_keeps_ids():
    by_key = {"clicks": "p.c.clicks.by-key", "views": "p.c.views.by-key"}
    with_ids = Topics("p.c.changelog", "p.c.timers", "p.c.ids", by_key)
    assert with_ids.all() == ["p.c.changelog", "p.c.timers", "p.c.ids", "p.c.clicks.by-key",
                              "p.c.views.by-key"]  # fmt: skip
    assert Topics("p.c.changelog", "p.c.timers", None, {}).all() == ["p.c.changelog", "p.c.timers"]


def test_a_verification_passes_only_with_no_key_differing_nothing_misplaced_and_equal_counts():
    assert verification().ok
    assert not verification(mismatched=1).ok
    assert not verification(misplaced=1).ok
    assert not verification(new_counts={**COUNTS, PENDING: 1}).ok
    assert not verification(new_counts={STATE: 3, TIMER: 1, PENDING: 2}).ok  # no id row counted


def test_its_lines_count_every_kind_and_name_the_keys_that_differ():
    failed = verification(counts={STATE: 2, PENDING: 5}, new_counts={STATE: 2, PENDING: 4},
                          mismatched=2, examples=["ann", "bob"])  # fmt: skip
    assert failed.lines("c") == [
        "verify c: 3 keys; old: 2 state, 0 timer, 0 id, 5 pending; "
        "new: 2 state, 0 timer, 0 id, 4 pending",
        "verify c: 2 keys whose checksums differ, 0 rows outside their key's partition: FAILED",
        "verify c: differs: ann",
        "verify c: differs: bob",
    ]
    assert verification().lines("c")[1].endswith(": OK")
