"""A computation as a part (framework/core/computation_spec.py): the topics it keeps with their
policies (with and without dedup and re-keyed inputs), the watermark channels it follows, its
node in the graph, and what the builder `computation_spec` refuses (each in one line naming
the fix) and sets for a window and a join."""

from __future__ import annotations

import pytest

from framework import Computation, Dedup, Percentile, Pipeline, PipelineError, key_by, windows
from framework.core.computation_spec import computation_spec
from framework.core.part import OwnTopic


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


class Stateful(Noop):
    state_schema = "shop.Totals"


def _spec(factory=Noop, **change):
    args = {
        "inputs": {"orders": None},
        "outputs": {"totals": None},
        "guarantee": "exactly_once",
        "partitions": 3,
        "state_schema": None,
        "on_error": "dead_letter",
        "tables": None,
        "formats": None,
        "low_watermark": None,
        "dedup": None,
        "hook_timeout_ms": 60_000,
        "global_tables": None,
        **change,
    }
    return computation_spec("shop", "c", factory, **args)


def test_a_computation_keeps_its_state_marks_and_dead_letters_with_their_policies():
    assert _spec().own_topics() == [
        OwnTopic("shop.c.changelog", "changelog", 3, "compact", True),
        OwnTopic("shop.c.timers", "timers", 3, "compact", True),
        OwnTopic("shop.c.watermarks", "watermarks", 1, "compact", True),
        OwnTopic("shop.c.dlq", "dlq", 1, "dlq", False),
        OwnTopic("shop.c.replay", "replay", 3, "replay", True),
        OwnTopic("shop.c.replayed", "replayed", 1, "compact", False),
    ]


def test_dedup_adds_the_ids_journal_and_each_rekeyed_input_its_repartition_topic():
    spec = _spec(
        inputs={"orders": key_by("user"), "refunds": None, "clicks": key_by("user")},
        dedup=Dedup(),
    )
    assert spec.own_topics() == [
        OwnTopic("shop.c.changelog", "changelog", 3, "compact", True),
        OwnTopic("shop.c.timers", "timers", 3, "compact", True),
        OwnTopic("shop.c.ids", "ids", 3, "compact", True),
        OwnTopic("shop.c.watermarks", "watermarks", 1, "compact", True),
        OwnTopic("shop.c.orders.by-key", "by-key", 3, "delete", True),
        OwnTopic("shop.c.clicks.by-key", "by-key", 3, "delete", True),  # not refunds: by Kafka key
        OwnTopic("shop.c.dlq", "dlq", 1, "dlq", False),
        OwnTopic("shop.c.replay", "replay", 3, "replay", True),
        OwnTopic("shop.c.replayed", "replayed", 1, "compact", False),
    ]
    assert spec.journals == {
        "changelog": "shop.c.changelog",
        "timers": "shop.c.timers",
        "ids": "shop.c.ids",
    }
    assert "ids" not in _spec().journals


def test_a_computation_follows_the_channels_of_each_input_in_order():
    p = Pipeline("shop").source("orders").source("clicks")
    p.computation("a", Noop, inputs={"orders": None}, outputs={"x": None})
    p.computation("b", Noop, inputs={"clicks": None}, outputs={"x": None, "y": None})
    p.computation("c", Noop, inputs={"y": None, "orders": None, "x": key_by("k")})
    assert p["c"].channels_followed(p) == [
        "shop.b.watermarks",  # y's writer
        "shop.a.watermarks",  # x's writers, in the order declared
        "shop.b.watermarks",
    ]
    assert p["a"].channels_followed(p) == []  # a source bounded by its records' times


def test_a_computation_does_not_ask_to_read_its_own_watermark_channel():
    """A computation reading what it writes follows its own channel, which its prefix grant
    covers already: no literal Read grant is added for it."""
    p = Pipeline("shop").source("orders")
    p.computation("loop", Noop, inputs={"orders": None, "again": None}, outputs={"again": None})
    spec = p["loop"]
    assert spec.channels_followed(p) == ["shop.loop.watermarks"]
    topics = [g for g in spec.grants(p) if g.resource == "TOPIC" and g.pattern == "LITERAL"]
    assert {g.name for g in topics if "READ" in g.operations} == {"orders", "again"}


def test_a_node_is_drawn_by_name_and_only_a_window_with_grace_says_more():
    p = Pipeline("shop").source("orders").source("payments")
    p.computation("c", Noop, inputs={"orders": None})
    counted = {"inputs": {"orders": None}, "aggregate": windows.Count()}
    p.windowed("w", window=windows.Tumbling(1000, grace_ms=250), output="w-out", **counted)
    p.windowed("w0", window=windows.Tumbling(1000), output="w0-out", **counted)
    p.join(
        "j",
        left="orders",
        right="payments",
        inputs={"orders": None, "payments": None},
        before_ms=5,
        after_ms=5,
        output="j-out",
    )
    assert {n: (s.node, s.detail) for n, s in p.computations.items()} == {
        "c": ("c:c", ""),
        "w": ("c:w", "grace 250 ms"),
        "w0": ("c:w0", ""),
        "j": ("c:j", ""),  # a join holds its watermark, but has no grace to tell
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"guarantee": "exactly-once"},
            "computation 'c': guarantee='exactly-once'; use one of "
            "('exactly_once', 'at_least_once')",
        ),
        ({"inputs": {}}, "computation 'c' needs at least one input stream"),
        (
            {"on_error": "retry"},
            "computation 'c': on_error='retry'; use one of ('dead_letter', 'skip', 'stop')",
        ),
        (
            {"on_late": "keep"},
            "computation 'c': on_late='keep'; use one of ('drop', 'dead_letter')",
        ),
        (
            {"formats": {"nope": "json"}},
            "computation 'c': formats names 'nope', which is not one of its outputs ['totals']",
        ),
        (
            {"formats": {"totals": "xml"}},
            "computation 'c': output 'totals': format='xml'; use one of "
            "('avro', 'confluent', 'json') (or leave it out)",
        ),
        (
            {"formats": {"totals": "avro"}},
            "computation 'c': output 'totals' is format='avro' but has no schema: give it one "
            "(outputs={stream: 'full.Name'})",
        ),
        (
            {"hook_timeout_ms": 0},
            "computation 'c': hook_timeout_ms=0; give whole milliseconds > 0 (default 60_000)",
        ),
        (
            {"hook_timeout_ms": 1.5},
            "computation 'c': hook_timeout_ms=1.5; give whole milliseconds > 0 (default 60_000)",
        ),
        (
            {"dedup": True},
            "computation 'c': dedup=True; use dedup=Dedup(id=..., horizon_ms=...)",
        ),
        (
            {"low_watermark": 0.99},
            "computation 'c': low_watermark=0.99; use Percentile(0.99) or leave it out for the "
            "strict minimum",
        ),
        (
            {"inputs": {"orders": "user"}},
            "computation 'c': input 'orders' needs key_by(field), a callable record -> str, "
            "or None",
        ),
    ],
)
def test_the_builder_refuses_what_cannot_run_in_one_line_naming_the_fix(change, message):
    with pytest.raises(PipelineError) as refused:
        _spec(**change)
    assert str(refused.value) == message


def test_the_builders_refusals_name_the_declaration_they_were_given():
    with pytest.raises(PipelineError, match=r"^join 'j': on_error='retry'; use one of"):
        _spec(on_error="retry", where="join 'j'")


def test_the_builder_takes_the_classs_state_schema_and_drops_formats_left_unset():
    spec = _spec(
        Stateful,
        outputs={"a": "shop.A", "b": None},
        guarantee="at_least_once",
        partitions=2,
        on_error="skip",
        formats={"a": "confluent", "b": None},
        low_watermark=Percentile(0.9),
        hook_timeout_ms=5,
    )
    assert spec.state_schema == "shop.Totals"
    assert spec.formats == {"a": "confluent"}
    assert (spec.guarantee, spec.exactly_once, spec.on_error) == ("at_least_once", False, "skip")
    assert (spec.kind, spec.on_late, spec.hold_ms) == ("computation", "drop", 0)
    assert spec.low_watermark == Percentile(0.9) and spec.hook_timeout_ms == 5
    assert _spec(Stateful, state_schema="shop.Given").state_schema == "shop.Given"


def test_the_builder_sets_a_windows_kind_late_policy_and_hold_from_its_grace():
    p = Pipeline("shop").source("orders")
    p.windowed(
        "w",
        inputs={"orders": None},
        window=windows.Hopping(size_ms=1000, every_ms=250, grace_ms=400),
        aggregate=windows.Count(),
        output="counts",
        on_late="dead_letter",
    )
    w = p["w"]
    assert (w.kind, w.on_late, w.hold_ms) == ("window", "dead_letter", 400)
    assert w.output_watermark(10_000, None) == 9_600  # every result stays on time downstream


def test_the_builder_sets_a_joins_kind_late_policy_and_hold_from_its_window_and_grace():
    p = Pipeline("shop").source("orders").source("payments")
    p.join(
        "j",
        left="orders",
        right="payments",
        inputs={"orders": None, "payments": None},
        before_ms=30,
        after_ms=70,
        grace_ms=5,
        output="paid",
        on_late="dead_letter",
    )
    j = p["j"]
    assert (j.kind, j.on_late, j.hold_ms) == ("join", "dead_letter", 70 + 5 + 1)
    assert j.output_watermark(1_000, 900) == 900 - 76
