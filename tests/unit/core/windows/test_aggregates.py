"""Every aggregator: add and merge agree with folding the whole list, bad values are refused
with their reason, accumulators stay JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core.api import Record
from framework.core.windows import Collect, Count, Max, Mean, Min, Reduce, Sum
from framework.errors import BadRecord, ConfigurationError

REFERENCE = {
    "Count": lambda xs: len(xs),
    "Sum": lambda xs: sum(xs),
    "Min": lambda xs: min(xs),
    "Max": lambda xs: max(xs),
    "Mean": lambda xs: sum(xs) / len(xs),
    "Collect": lambda xs: xs,
    "Reduce": lambda xs: sum(xs),
}
AGGREGATORS = {
    "Count": Count(),
    "Sum": Sum("n"),
    "Min": Min("n"),
    "Max": Max("n"),
    "Mean": Mean("n"),
    "Collect": Collect("n"),
    "Reduce": Reduce(0, lambda acc, v: acc + v["n"], merge=lambda a, b: a + b),
}


def records(values: list[int]) -> list[Record]:
    return [Record("k", {"n": v}, i) for i, v in enumerate(values)]


def fold(aggregate, values: list[int]):
    acc = aggregate.initial()
    for record in records(values):
        acc = aggregate.add(acc, record)
        json.dumps(acc)  # the accumulator lives in the changelog
    return acc


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
@given(
    left=st.lists(st.integers(-1000, 1000), min_size=1, max_size=20),
    right=st.lists(st.integers(-1000, 1000), min_size=1, max_size=20),
)
def test_add_and_merge_agree_with_the_whole_list(name, left, right):
    aggregate, reference = AGGREGATORS[name], REFERENCE[name]
    assert aggregate.result(fold(aggregate, left + right)) == reference(left + right)
    merged = aggregate.merge(fold(aggregate, left), fold(aggregate, right))
    assert aggregate.result(merged) == reference(left + right)


@pytest.mark.parametrize("aggregate", [Sum("n"), Min("n"), Max("n"), Mean("n")])
@pytest.mark.parametrize("value", [{"n": "7"}, {"m": 1}, [1], {"n": None}])
def test_a_value_the_aggregator_cannot_take_is_a_bad_record_naming_it(aggregate, value):
    with pytest.raises(BadRecord) as failure:
        aggregate.add(aggregate.initial(), Record("k", value, 0))
    assert failure.value.stage == "aggregate"
    assert repr(aggregate) in str(failure.value)


def test_collect_refuses_the_record_beyond_its_limit_and_keeps_what_it_had():
    collect = Collect(limit=2)
    acc = fold(collect, [1, 2])
    assert acc == [{"n": 1}, {"n": 2}]
    with pytest.raises(BadRecord, match="over its limit of 2"):
        collect.add(acc, Record("k", {"n": 3}, 0))
    assert acc == [{"n": 1}, {"n": 2}]
    with pytest.raises(ConfigurationError):
        Collect(limit=0)


def test_reduce_copies_its_initial_value_for_each_window():
    keep = Reduce([], lambda acc, v: [*acc, v], merge=lambda a, b: a + b)
    first = keep.initial()
    first.append("x")
    assert keep.initial() == []
    assert Reduce(lambda: {"n": 0}, lambda acc, v: acc).initial() == {"n": 0}
    assert not Reduce(0, lambda acc, v: acc).mergeable
    with pytest.raises(NotImplementedError):
        Reduce(0, lambda acc, v: acc).merge(1, 2)
