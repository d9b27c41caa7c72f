"""The queries of a pipeline's state as a part (framework/core/query_spec.py): it keeps no
topic, runs no task and is no node; its grants as data — per queryable group, Describe on the
group, Read on its directory of serving instances, and a reader group of its own — sorted, each
once, whatever the order of the groups."""

from __future__ import annotations

from framework.core.part import GROUP_OPERATIONS, READ_OPERATIONS, Grant
from framework.core.query_spec import QUERIES, QueriesSpec


def test_the_queries_keep_no_topic_and_are_no_node():
    spec = QueriesSpec("shop", ("shop.a",))
    assert QUERIES == "queries"
    assert (spec.name, spec.kind, spec.runtime) == ("queries", "queries", None)
    assert spec.own_topics() == [] and spec.tables_read() == []
    assert (spec.node, spec.detail, spec.watermarks, spec.partitions) == (None, "", None, 0)
    assert (spec.group, spec.dlq, spec.replayable, spec.queryable) == (None, None, False, False)


def test_the_queries_describe_each_group_read_its_directory_with_a_reader_group_of_their_own():
    grants = QueriesSpec("shop", ("shop.b", "shop.a")).grants(graph=None)
    assert grants == [
        Grant("GROUP", "LITERAL", "shop.a", ("DESCRIBE",)),
        Grant("GROUP", "LITERAL", "shop.a.reader", GROUP_OPERATIONS),
        Grant("GROUP", "LITERAL", "shop.b", ("DESCRIBE",)),
        Grant("GROUP", "LITERAL", "shop.b.reader", GROUP_OPERATIONS),
        Grant("TOPIC", "LITERAL", "shop.a.serving", READ_OPERATIONS),
        Grant("TOPIC", "LITERAL", "shop.b.serving", READ_OPERATIONS),
    ]
    assert QueriesSpec("shop", ("shop.b", "shop.a")).grants(None, reset=True) == grants
    assert QueriesSpec("shop", ()).grants(None) == []
