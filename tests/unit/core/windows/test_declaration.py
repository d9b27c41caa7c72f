"""Declaring a windowed aggregation (framework/core/windows/declaration.py): what it refuses,
each in one line naming the fix and the declaration, and the computation spec it builds — the
`Windowed` operator of its window, aggregate, output and emit, its one output and format, and
the builder's checks run under its own name."""

from __future__ import annotations

import pytest

from framework import Dedup, Percentile, PipelineError, key_by
from framework.core.windows.aggregates import Count, Reduce, Sum
from framework.core.windows.declaration import windowed_spec
from framework.core.windows.operator import Windowed
from framework.core.windows.shapes import Hopping, Session, Tumbling


def _windowed(**change):
    args = {
        "inputs": {"clicks": key_by("user")},
        "window": Tumbling(1000),
        "aggregate": Count(),
        "output": "counts",
        "output_schema": None,
        "output_format": None,
        "emit": "final",
        "guarantee": "exactly_once",
        "on_late": "drop",
        "on_error": "dead_letter",
        "partitions": 2,
        "low_watermark": None,
        "dedup": None,
        "hook_timeout_ms": 60_000,
        "global_tables": None,
        **change,
    }
    return windowed_spec("shop", "w", **args)


def _add(acc, value):
    return acc + 1


def _merge(a, b):
    return a + b


def test_a_window_that_is_no_window_shape_is_refused_naming_the_shapes():
    for window in (60_000, (0, 1000), "1m"):
        with pytest.raises(PipelineError) as refused:
            _windowed(window=window)
        assert str(refused.value) == (
            f"windowed computation 'w': window={window!r}; use windows.Tumbling(size_ms), "
            "windows.Hopping(size_ms, every_ms) or windows.Session(gap_ms)"
        )


def test_an_aggregate_that_is_no_aggregate_is_refused_naming_the_aggregates():
    with pytest.raises(PipelineError) as refused:
        _windowed(aggregate=len)
    assert str(refused.value) == (
        f"windowed computation 'w': aggregate={len!r}; use windows.Count(), Sum(field), "
        "Min(field), Max(field), Mean(field), Collect(field) or Reduce(initial, add, merge)"
    )


def test_sessions_refuse_an_aggregate_that_cannot_merge_and_take_one_that_can():
    unmergeable = Reduce(0, _add)
    with pytest.raises(PipelineError) as refused:
        _windowed(window=Session(gap_ms=100), aggregate=unmergeable)
    assert str(refused.value) == (
        f"windowed computation 'w': session windows merge, and {unmergeable!r} cannot: give "
        "Reduce(initial, add, merge=...) a merge(a, b) of two accumulators"
    )
    assert _windowed(window=Tumbling(100), aggregate=unmergeable).kind == "window"  # no merging
    assert _windowed(window=Session(gap_ms=100), aggregate=Reduce(0, _add, _merge)).kind == "window"
    assert _windowed(window=Session(gap_ms=100), aggregate=Sum("n")).kind == "window"


def test_an_emit_policy_that_does_not_exist_is_refused_naming_those_that_do():
    with pytest.raises(PipelineError) as refused:
        _windowed(emit="always")
    assert (
        str(refused.value)
        == "windowed computation 'w': emit='always'; use one of ('final', 'update')"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"on_late": "ignore"}, "windowed computation 'w': on_late='ignore'; use one of"),
        ({"guarantee": "once"}, "windowed computation 'w': guarantee='once'; use one of"),
        ({"output_format": "avro"}, "windowed computation 'w': output 'counts' is format='avro'"),
        ({"inputs": {}}, "windowed computation 'w' needs at least one input stream"),
    ],
)
def test_the_builders_refusals_name_the_windowed_computation(change, message):
    with pytest.raises(PipelineError) as refused:
        _windowed(**change)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_the_spec_runs_the_windowed_operator_of_what_was_declared():
    window, aggregate = Hopping(size_ms=1000, every_ms=500, grace_ms=200), Sum("n")
    spec = _windowed(window=window, aggregate=aggregate, emit="update", output="sums")
    operator = spec.factory()
    assert isinstance(operator, Windowed)
    assert (operator.window, operator.aggregate, operator.output) == (window, aggregate, "sums")
    assert operator.final is False
    assert _windowed().factory().final is True
    assert spec.factory() is not operator  # one operator per task


def test_the_spec_writes_its_one_output_in_its_format_and_passes_the_rest_on():
    spec = _windowed(
        output_schema="shop.Count",
        output_format="confluent",
        guarantee="at_least_once",
        on_error="skip",
        partitions=6,
        low_watermark=Percentile(0.95),
        dedup=Dedup(),
        hook_timeout_ms=500,
        global_tables={"users": "users-table"},
    )
    assert (spec.pipeline, spec.name, spec.group) == ("shop", "w", "shop.w")
    assert dict(spec.outputs) == {"counts": "shop.Count"}
    assert dict(spec.formats) == {"counts": "confluent"}
    assert [i.stream for i in spec.inputs] == ["clicks"]
    assert (spec.guarantee, spec.on_error, spec.partitions) == ("at_least_once", "skip", 6)
    assert (spec.low_watermark, spec.hook_timeout_ms) == (Percentile(0.95), 500)
    assert spec.dedup == Dedup()
    assert spec.global_tables["users"].topic == "users-table"
    assert (spec.state_schema, dict(spec.tables)) == (None, {})
    plain = _windowed()
    assert (dict(plain.outputs), dict(plain.formats)) == ({"counts": None}, {})
