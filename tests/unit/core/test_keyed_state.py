"""The write-back state cache: sealing per hook call, rollback, changes against the committed
form, eviction of clean documents only."""

from __future__ import annotations

import pytest

from framework.core.keyed_state import KeyedState
from framework.errors import BadRecord
from framework.serde.json_codec import decode_json, encode_json


class _Backend:
    def __init__(self, docs: dict[str, dict]):
        self.raw = {k: encode_json(v) for k, v in docs.items()}
        self.loads: list[str] = []

    def load(self, key):
        self.loads.append(key)
        return self.raw.get(key)

    def apply(self, changes):
        for key, raw in changes:
            if raw is None:
                self.raw.pop(key, None)
            else:
                self.raw[key] = raw


def state(docs=None, **kwargs) -> tuple[KeyedState, _Backend]:
    backend = _Backend(docs or {})
    return KeyedState(backend, encode_json, decode_json, **kwargs), backend


def touch(st: KeyedState, key: str, change=None) -> dict:
    """One hook call on `key`: change its document, then seal it."""
    doc = st.get(key)
    if change:
        change(doc)
    st.seal(key, doc)
    return doc


def decoded(changes):
    return [(k, None if raw is None else decode_json(raw)) for k, raw in changes]


def test_changes_report_only_changed_docs():
    st, _ = state({"a": {"n": 1}, "b": {"n": 2}, "c": {"n": 3}})
    touch(st, "a")  # touched, unchanged
    touch(st, "b", lambda d: d.update(n=20))
    touch(st, "c", lambda d: d.clear())  # emptied -> tombstone
    touch(st, "d")  # new, still empty: nothing to write
    touch(st, "e", lambda d: d.update(x=[1, {"y": 2}]))
    assert decoded(st.changes()) == [("b", {"n": 20}), ("c", None), ("e", {"x": [1, {"y": 2}]})]
    st.committed()
    assert st.changes() == []
    # back to the committed value = no change; mutations of nested values are seen
    touch(st, "b", lambda d: d.update(n=21))
    touch(st, "b", lambda d: d.update(n=20))
    touch(st, "e", lambda d: d["x"][1].update(y=3))
    assert decoded(st.changes()) == [("e", {"x": [1, {"y": 3}]})]


def test_state_that_cannot_be_stored_fails_the_hook_call_and_rolls_back():
    st, _ = state({"a": {"n": 1}})
    doc = st.get("a")
    doc["s"] = {1, 2}
    with pytest.raises(BadRecord, match="state of key 'a' cannot be stored") as failed:
        st.seal("a", doc)
    assert failed.value.stage == "state"
    st.rollback("a")
    assert st.get("a") == {"n": 1}
    assert st.changes() == []


def test_state_over_the_changelog_limit_fails_at_seal():
    st, _ = state(max_bytes=100)
    doc = st.get("a")
    doc["blob"] = "x" * 200
    with pytest.raises(BadRecord, match="over the changelog's limit of 100 bytes"):
        st.seal("a", doc)


def test_rollback_returns_to_the_last_sealed_form_not_the_committed_one():
    st, _ = state()
    touch(st, "a", lambda d: d.update(n=1))
    st.get("a")["n"] = 99  # a failing hook call
    st.rollback("a")
    assert st.get("a") == {"n": 1}
    assert decoded(st.changes()) == [("a", {"n": 1})]


def test_keys_sealed_after_changes_stay_dirty():
    st, _ = state()
    touch(st, "a", lambda d: d.update(n=1))
    assert decoded(st.changes()) == [("a", {"n": 1})]
    touch(st, "a", lambda d: d.update(n=2))  # a hook ran between changes() and committed()
    st.committed()
    assert decoded(st.changes()) == [("a", {"n": 2})]


def test_evicts_only_clean_keys_and_never_the_key_being_loaded():
    st, backend = state(capacity=3)
    for k in "abcde":
        touch(st, k, lambda d, k=k: d.update(v=k))
    assert len(st) == 5  # all dirty: nothing evicted
    backend.apply(st.changes())
    st.committed()
    assert len(st) == 3
    assert st.get("a") == {"v": "a"} and backend.loads.count("a") == 2  # reloaded
    assert st.changes() == []
    st2, _ = state(capacity=1)
    touch(st2, "x", lambda d: d.update(v=1))  # dirty, so cannot be evicted
    assert st2.get("y") == {} and len(st2) == 2
    touch(st2, "y", lambda d: d.update(v=2))
    assert decoded(st2.changes()) == [("x", {"v": 1}), ("y", {"v": 2})]


def test_reads_of_many_keys_between_commits_stay_within_capacity_and_its_slack():
    st, backend = state(capacity=16)
    for i in range(1000):  # clean reads: every one a key of its own, no commit between
        assert st.get(f"k{i}") == {}
        assert len(st) <= 16 + 16 // 8
    st.committed()
    assert len(st) == 16


def test_dirty_documents_an_eviction_meets_wait_aside_for_the_commit():
    st, backend = state({"d0": {"n": -1}}, capacity=4)
    for i in range(6):
        touch(st, f"d{i}", lambda d, i=i: d.update(n=i))
    for k in "xy":  # clean reads: the evictions they start set d0-d3 aside
        st.get(k)
    assert len(st) == 8 and backend.loads == ["d0", "d1", "d2", "d3", "d4", "d5", "x", "y"]
    assert len(st._cache) <= 4 + 1  # what the next eviction walks: not the dirty ones set aside
    assert st.peek("d1") == {"n": 1}
    assert st.get("d0") == {"n": 0} and len(backend.loads) == 8  # not reloaded
    backend.apply(st.changes())
    st.committed()  # now clean: kept by recency, d0 (just read), y, x, d5
    backend.loads.clear()
    for k in ("d0", "y", "x", "d5", "d1"):
        st.get(k)
    assert backend.loads == ["d1"] and st.get("d1") == {"n": 1}


def counting_state(docs=None, **kwargs) -> tuple[KeyedState, _Backend, list]:
    """A state whose every encode is recorded (the key-less document)."""
    encoded: list = []

    def encode(doc):
        encoded.append(decode_json(encode_json(doc)))
        return encode_json(doc)

    backend = _Backend(docs or {})
    return KeyedState(backend, encode, decode_json, **kwargs), backend, encoded


def defer(st: KeyedState, key: str, change=None, added: int = 0) -> dict:
    """One hook call on `key` of a computation that vouches for its state."""
    doc = st.get(key)
    if change:
        change(doc)
    st.defer(key, added)
    return doc


def test_deferred_documents_are_encoded_once_at_changes_not_per_call():
    st, backend, encoded = counting_state({"a": {"n": [0]}})
    for i in range(1, 50):
        defer(st, "a", lambda d, i=i: d["n"].append(i))
    defer(st, "b", lambda d: d.update(x=1))
    defer(st, "c")  # touched, still empty: nothing to write
    assert encoded == []
    assert decoded(st.changes()) == [("a", {"n": list(range(50))}), ("b", {"x": 1})]
    assert len(encoded) == 2
    backend.apply(st.changes())
    st.committed()
    assert st.changes() == [] and len(encoded) == 2
    defer(st, "a", lambda d: d.clear())  # emptied: a tombstone
    assert decoded(st.changes()) == [("a", None)]


def test_a_deferred_document_touched_between_changes_and_committed_stays_dirty():
    st, backend, _ = counting_state()
    defer(st, "a", lambda d: d.update(n=1))
    backend.apply(st.changes())
    defer(st, "a", lambda d: d.update(n=2))  # a hook ran while the commit was under way
    st.committed()
    assert decoded(st.changes()) == [("a", {"n": 2})]


def test_a_failed_call_leaves_a_deferred_document_as_it_is_and_sealing_makes_it_exact():
    st, _, _ = counting_state()
    defer(st, "a", lambda d: d.update(n=1))
    st.rollback("a")  # a failed call of a computation that changes nothing when it fails
    assert st.get("a") == {"n": 1}
    touch(st, "a", lambda d: d.update(n=2))  # sealed after all: no longer deferred
    st.get("a")["n"] = 99
    st.rollback("a")
    assert st.get("a") == {"n": 2}
    assert decoded(st.changes()) == [("a", {"n": 2})]


def test_deferred_documents_set_aside_by_an_eviction_are_still_written():
    st, backend, _ = counting_state(capacity=1)
    for k in "abc":
        defer(st, k, lambda d, k=k: d.update(v=k))
    st.get("x")  # a clean read: the eviction sets a and b aside
    assert decoded(st.changes()) == [("a", {"v": "a"}), ("b", {"v": "b"}), ("c", {"v": "c"})]


def test_fits_bounds_a_deferred_document_by_its_last_size_and_what_calls_added():
    st, _, _ = counting_state(max_bytes=100)
    assert st.fits("a", 90) and not st.fits("a", 98)
    touch(st, "a", lambda d: d.update(s="x" * 40))  # sealed: 48 bytes encoded
    assert st.fits("a", 40) and not st.fits("a", 60)
    defer(st, "a", added=30)
    assert st.fits("a", 10) and not st.fits("a", 30)
    st.changes()  # encoded: the estimate is the exact size again (unchanged document)
    assert st.fits("a", 40)
    assert counting_state()[0].fits("a", 10**9)  # no limit
