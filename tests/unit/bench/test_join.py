"""bench/join.py's reference: what an interval join must write, against pairs counted one by one,
and its input: in time order, closing every window, its tail never answered."""

from __future__ import annotations

import collections
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import join

Event = join.Event
records = st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3 * join.AFTER_MS)), max_size=12)


def quadratic(lefts: list[Event], rights: list[Event], how: str) -> collections.Counter:
    """The join by its definition: every left record against every right one."""
    out: collections.Counter = collections.Counter()
    met: set[str] = set()
    for left in lefts:
        partners = [
            r
            for r in rights
            if r.key == left.key
            and left.timestamp - join.BEFORE_MS <= r.timestamp <= left.timestamp + join.AFTER_MS
        ]
        out.update((left.key, left.id, r.id) for r in partners)
        met.update(r.id for r in partners)
        if not partners and how != "inner":
            out[(left.key, left.id, None)] += 1
    if how == "outer":
        out.update((r.key, None, r.id) for r in rights if r.id not in met)
    return out


@settings(max_examples=200, deadline=None)
@given(lefts=records, rights=records, how=st.sampled_from(join.HOWS))
def test_the_reference_is_the_join_by_its_definition(lefts, rights, how) -> None:
    ls = [Event(k, t, f"l{i}") for i, (k, t) in enumerate(lefts)]
    rs = [Event(k, t, f"r{i}") for i, (k, t) in enumerate(rights)]
    random.Random(len(ls)).shuffle(rs)  # any arrival order
    assert join.reference(ls, rs, how) == quadratic(ls, rs, how)


@pytest.mark.parametrize("how", join.HOWS)
def test_both_edges_are_inclusive(how: str) -> None:
    left = Event("a", 10_000, "l")
    edges = [Event("a", 10_000 - join.BEFORE_MS, "r0"), Event("a", 10_000 + join.AFTER_MS, "r1")]
    outside = [Event("a", 10_000 + join.AFTER_MS + 1, "r2")]
    got = join.reference([left], edges + outside, how)
    assert got[("a", "l", "r0")] == got[("a", "l", "r1")] == 1
    assert ("a", "l", "r2") not in got and ("a", "l", None) not in got
    assert (got[("a", None, "r2")] == 1) == (how == "outer")


def test_the_input_is_in_order_closes_every_window_and_its_tail_is_never_answered() -> None:
    data = join.make_input(records=400, keys=5, minutes=1, base=0)
    assert data.records() == 400 + 2 * data.closing + len(data.tail)
    for side in ("left", "right"):
        times = [e.timestamp for e in data.events[side]]
        assert times == sorted(times)
    last = max(e.timestamp for e in data.events["right"][: -data.closing])
    end = data.events["left"][-1].timestamp
    assert end > last + max(join.BEFORE_MS, join.AFTER_MS) + join.GRACE_MS
    assert min(e.timestamp for e in data.tail) > end
    tail = {e.id for e in data.tail}
    for how in join.HOWS:
        expected = data.expected(how)
        assert not any(result[1] in tail for result in expected)
        # the warm-up and closing pairs, one per partition each
        assert sum(1 for k, _, _ in expected if k.startswith("warmup-")) == 2 * join.PARTITIONS
    paid = sum(data.expected("inner").values())
    assert paid > 0.8 * 200  # four payments in five meet their order at least
