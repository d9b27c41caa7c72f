"""Declaring an interval join (framework/core/joins/declaration.py), beyond what
tests/unit/core/joins/test_join.py checks: the whole one-line refusals (the window's empty sum
worked out, a side named among the inputs there are, durations that are no int), the edges a
join still takes, the builder's checks run under the join's name, and the spec it builds — the
`Joined` operator of what was declared, its one output and format."""

from __future__ import annotations

import pytest

from framework import Dedup, PipelineError, key_by
from framework.core.joins.declaration import join_spec
from framework.core.joins.operator import Joined


def _join(**change):
    args = {
        "left": "orders",
        "right": "payments",
        "inputs": {"orders": None, "payments": key_by("order")},
        "before_ms": 0,
        "after_ms": 10,
        "grace_ms": 0,
        "how": "inner",
        "output": "paid",
        "output_schema": None,
        "output_format": None,
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
    return join_spec("shop", "j", **args)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"before_ms": -7, "after_ms": 3},
            "join 'j': before_ms + after_ms = -4 < 0 makes the window empty (a right record at "
            "t_r matches a left one at t_l when t_l - before_ms <= t_r <= t_l + after_ms): make "
            "before_ms + after_ms >= 0",
        ),
        (
            {"right": "refunds"},
            "join 'j': right='refunds' is not among inputs ['orders', 'payments']: give it a key "
            "extractor, inputs={'refunds': key_by(...) or None, ...}",
        ),
        (
            {"inputs": None},
            "join 'j': left='orders' is not among inputs []: give it a key extractor, "
            "inputs={'orders': key_by(...) or None, ...}",
        ),
        ({"before_ms": True}, "join 'j': before_ms=True; give whole milliseconds (an int)"),
        ({"grace_ms": 2.0}, "join 'j': grace_ms=2.0; give whole milliseconds (an int)"),
        ({"grace_ms": -3}, "join 'j': grace_ms=-3; give grace_ms >= 0"),
        ({"how": "right"}, "join 'j': how='right'; use one of ('inner', 'left', 'outer')"),
        (
            {"on_error": "retry"},
            "join 'j': on_error='retry'; use one of ('dead_letter', 'skip', 'stop')",
        ),
        (
            {"output_format": "confluent"},
            "join 'j': output 'paid' is format='confluent' but has no schema: give it one "
            "(outputs={stream: 'full.Name'})",
        ),
        (
            {"hook_timeout_ms": 0},
            "join 'j': hook_timeout_ms=0; give whole milliseconds > 0 (default 60_000)",
        ),
    ],
)
def test_a_join_that_cannot_run_is_refused_in_one_line_naming_the_fix(change, message):
    with pytest.raises(PipelineError) as refused:
        _join(**change)
    assert str(refused.value) == message


@pytest.mark.parametrize(("before_ms", "after_ms"), [(-5, 5), (5, -5), (0, 0)])
def test_a_window_of_one_instant_is_still_a_window(before_ms, after_ms):
    spec = _join(before_ms=before_ms, after_ms=after_ms)
    assert (spec.factory().before, spec.factory().after) == (before_ms, after_ms)


def test_the_spec_runs_the_joined_operator_of_what_was_declared():
    spec = _join(before_ms=30, after_ms=70, grace_ms=5, how="outer", output="matched")
    operator = spec.factory()
    assert isinstance(operator, Joined)
    assert (operator.left, operator.right, operator.output) == ("orders", "payments", "matched")
    assert (operator.before, operator.after, operator.grace) == (30, 70, 5)
    assert operator.alone == {"l": True, "r": True}  # outer: either side alone
    assert _join(how="left").factory().alone == {"l": True, "r": False}
    assert _join().factory().alone == {"l": False, "r": False}
    assert spec.factory() is not operator  # one operator per task


def test_the_spec_reads_both_sides_and_writes_its_one_output_in_its_format():
    spec = _join(
        output_schema="shop.Paid",
        output_format="avro",
        on_late="dead_letter",
        partitions=5,
        dedup=Dedup(),
    )
    assert [(i.stream, i.key) for i in spec.inputs][0] == ("orders", None)
    assert [i.stream for i in spec.inputs] == ["orders", "payments"]
    assert spec.keyed_topics == ["orders", "shop.j.payments.by-key"]
    assert (dict(spec.outputs), dict(spec.formats)) == ({"paid": "shop.Paid"}, {"paid": "avro"})
    assert (spec.on_late, spec.partitions, spec.dedup) == ("dead_letter", 5, Dedup())
    assert (spec.state_schema, dict(spec.tables)) == (None, {})
    assert dict(_join().formats) == {}
