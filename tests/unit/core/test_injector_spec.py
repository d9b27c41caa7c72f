"""An injector as a part (framework/core/injector_spec.py): the one topic it keeps (its
watermark channel, compacted, one partition), no node of its own in the graph, what it reads
and writes as a part, and its grants as data — Write on its streams and channel, Create on the
channel alone, its transactional ids — the same with `reset`, since it keeps no state."""

from __future__ import annotations

from framework import InjectorWatermark, Pipeline
from framework.core.injector_spec import InjectorSpec
from framework.core.part import TRANSACTION_OPERATIONS, WRITE_OPERATIONS, Grant, OwnTopic


def test_an_injector_keeps_only_its_watermark_channel():
    spec = InjectorSpec("shop", "gen", ("clicks", "views"), 3)
    assert spec.watermarks == "shop.gen.watermarks"
    assert spec.own_topics() == [OwnTopic("shop.gen.watermarks", "watermarks", 1, "compact", True)]
    assert spec.tables_read() == []


def test_an_injector_is_no_node_and_reads_nothing_as_a_part():
    spec = InjectorSpec("shop", "gen", ("clicks",), 1)
    assert (spec.node, spec.detail, spec.partitions) == (None, "", 0)
    assert (spec.inputs, dict(spec.outputs), dict(spec.formats)) == ((), {}, {})
    assert (spec.consumed_topics, spec.subscribed_topics, spec.keyed_topics) == ((), (), ())


def test_an_injector_writes_its_streams_and_channel_and_creates_only_the_channel():
    p = Pipeline("shop").source("views", watermark=InjectorWatermark("gen"))
    p.source("clicks", watermark=InjectorWatermark("gen"))
    spec = p.part("gen")
    assert spec.transactional_prefix == "shop.gen.injector-"
    expected = [
        Grant("TOPIC", "LITERAL", "clicks", WRITE_OPERATIONS),
        Grant("TOPIC", "LITERAL", "shop.gen.watermarks", WRITE_OPERATIONS),
        Grant("TOPIC", "LITERAL", "views", WRITE_OPERATIONS),
        Grant("TOPIC", "LITERAL", "shop.gen.watermarks", ("CREATE",)),
        Grant("TRANSACTIONAL_ID", "PREFIXED", "shop.gen.injector-", TRANSACTION_OPERATIONS),
    ]
    assert spec.grants(p) == expected
    assert spec.grants(p, reset=True) == expected  # nothing of its own to delete
