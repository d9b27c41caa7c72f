"""The topic plan of a pipeline (each stream, and each part's own topics), without a broker;
creating it against a fake admin client, for what the code decides around the broker's
answers."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.backfill.plan import backfill_topic_spec
from framework.core.api import Computation
from framework.core.declarations import internal_topic
from framework.core.dedup import Dedup
from framework.core.pipeline import (
    BoundedOutOfOrderness,
    InjectorWatermark,
    Pipeline,
    PipelineError,
    key_by,
)
from framework.errors import Retry
from framework.kafka.errors import Unreachable
from framework.kafka.topics import (
    COMPACT,
    TopicSpec,
    check_existing,
    ensure_topics,
    pipeline_topics,
    replication_for,
)


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def zeitgeist(partitions: int = 4) -> Pipeline:
    p = Pipeline("zg", partitions=partitions)
    p.source("queries", schema="zeitgeist.SearchQuery", watermark=InjectorWatermark("gen", 2))
    p.source("clicks", watermark=BoundedOutOfOrderness(ms=1000))
    p.computation(
        "counter",
        Noop,
        inputs={"queries": key_by("query"), "clicks": None},
        outputs={"window-counts": "zeitgeist.WindowResult"},
    )
    p.computation(
        "model",
        Noop,
        inputs={"window-counts": None},
        outputs={"anomalies": "zeitgeist.Anomaly"},
        partitions=8,
    )
    return p


def by_name(plan: list[TopicSpec]) -> dict[str, TopicSpec]:
    return {t.name: t for t in plan}


def test_every_topic_of_the_contract_is_planned():
    plan = by_name(pipeline_topics(zeitgeist()))
    assert sorted(plan) == sorted(
        [
            "queries",
            "clicks",
            "window-counts",
            "anomalies",
            "zg.counter.changelog",
            "zg.counter.timers",
            "zg.counter.watermarks",
            "zg.counter.queries.by-key",
            "zg.counter.dlq",
            "zg.counter.replay",
            "zg.counter.replayed",
            "zg.model.changelog",
            "zg.model.timers",
            "zg.model.watermarks",
            "zg.model.dlq",
            "zg.model.replay",
            "zg.model.replayed",
            "zg.gen.watermarks",
        ]
    )


def test_policies():
    plan = by_name(pipeline_topics(zeitgeist()))
    for name in ["queries", "clicks", "window-counts", "anomalies", "zg.counter.queries.by-key"]:
        assert plan[name].config["cleanup.policy"] == "delete", name
    for name in [
        "zg.counter.changelog",
        "zg.counter.timers",
        "zg.counter.watermarks",
        "zg.model.changelog",
        "zg.gen.watermarks",
    ]:
        assert plan[name].config == dict(COMPACT), name
        assert plan[name].config["min.compaction.lag.ms"] == "0"
        assert plan[name].compacted
    assert plan["zg.counter.dlq"].config["cleanup.policy"] == "delete"
    # replays keep their original times: no time-bounded retention may delete them unread
    assert plan["zg.model.replay"].config == {"cleanup.policy": "delete", "retention.ms": "-1"}
    assert (plan["zg.model.replay"].partitions, plan["zg.model.replay"].exact) == (8, True)
    assert plan["zg.model.replayed"].config == dict(COMPACT)
    assert plan["zg.model.replayed"].partitions == 1
    assert plan["zg.counter.dlq"].partitions == 1


def test_partitions():
    plan = by_name(pipeline_topics(zeitgeist()))
    counts = {name: t.partitions for name, t in plan.items()}
    assert counts["zg.counter.changelog"] == counts["zg.counter.timers"] == 4
    assert counts["zg.counter.queries.by-key"] == 4
    assert counts["zg.model.changelog"] == counts["zg.model.timers"] == 8
    assert counts["zg.counter.watermarks"] == counts["zg.gen.watermarks"] == 1
    # read by Kafka key: co-partitioned with the reader's state, exactly
    assert counts["clicks"] == 4 and plan["clicks"].exact
    assert counts["window-counts"] == 8 and plan["window-counts"].exact
    # re-keyed or unread: any count works; created with the writers' (or the default)
    assert counts["queries"] == 4 and not plan["queries"].exact
    assert counts["anomalies"] == 8 and not plan["anomalies"].exact


def test_direct_readers_must_agree_on_partitions():
    p = zeitgeist()
    p.computation("other", Noop, inputs={"window-counts": None}, partitions=2)
    with pytest.raises(PipelineError, match="window-counts.*partitions"):
        pipeline_topics(p)


def test_a_stream_named_like_an_internal_topic_is_refused():
    p = Pipeline("zg")
    p.source("in")
    with pytest.raises(PipelineError, match=r"zg\.c\.dlq.*inside computation 'c'"):
        p.computation("c", Noop, inputs={"in": None}, outputs={"zg.c.dlq": None})


def test_every_internal_topic_planned_is_known_as_one_and_no_stream_is():
    """What `Pipeline` refuses to write (another pipeline's internal topics) is recognised
    from the name alone: every kind of internal topic a plan holds, dedup ids and backfill
    plans included; a new kind that the pattern misses fails here."""
    p = zeitgeist()
    p.computation("dedup", Noop, inputs={"clicks": key_by("u")}, dedup=Dedup())
    topics = [*pipeline_topics(p), backfill_topic_spec(p["dedup"])]
    assert {t.kind for t in topics} >= {"changelog", "timers", "ids", "by-key", "dlq", "backfill"}
    for topic in topics:
        assert (internal_topic(topic.name) is None) == (topic.kind == "stream"), topic.name


def test_existing_topics_that_cannot_serve_name_the_fix():
    plan = by_name(pipeline_topics(zeitgeist()))
    assert check_existing(plan["queries"], 1, None) is None  # re-keyed: any count
    assert check_existing(plan["zg.counter.dlq"], 3, None) is None
    assert check_existing(plan["zg.counter.changelog"], 4, "compact") is None
    assert check_existing(plan["zg.counter.changelog"], 4, "compact,delete") is None

    fewer = check_existing(plan["zg.counter.changelog"], 2, "compact")
    assert "has 2 partitions" in fewer and "partitions=2" in fewer
    assert "logwheel rescale MODULE:ATTR --computation counter --partitions 4" in fewer
    more = check_existing(plan["clicks"], 6, None)
    assert "'counter'" in more and "partitions=6" in more and "key_by" in more
    channel = check_existing(plan["zg.gen.watermarks"], 3, "compact")
    assert "exactly 1" in channel and "--delete --topic zg.gen.watermarks" in channel
    deleting = check_existing(plan["zg.counter.timers"], 4, "delete")
    assert "cleanup.policy=delete" in deleting and "cleanup.policy=compact" in deleting


@pytest.mark.parametrize(
    ("brokers", "asked", "expected"),
    [
        (1, None, (1, {})),
        (2, None, (2, {})),
        (3, None, (3, {"min.insync.replicas": "2"})),
        (5, None, (3, {"min.insync.replicas": "2"})),
        (5, 2, (2, {})),
        (3, 1, (1, {})),
    ],
)
def test_new_topics_are_replicated_on_every_broker_up_to_three(brokers, asked, expected):
    assert replication_for(brokers, asked) == expected


def test_a_replication_factor_above_the_brokers_up_is_refused_with_the_fix():
    with pytest.raises(PipelineError, match="--replication-factor 2 or start"):
        replication_for(2, 3)


class LeaderlessAdmin:
    """An admin client of a cluster whose partitions have no leader (a broker down), that
    refuses to create `refused` (another principal's topics)."""

    def __init__(self, existing: dict[str, int], refused: set[str] = frozenset()) -> None:
        self.existing, self.refused = existing, refused

    def list_topics(self, timeout: float) -> SimpleNamespace:
        partition = SimpleNamespace(leader=-1)
        topics = {
            name: SimpleNamespace(error=None, partitions=dict.fromkeys(range(n), partition))
            for name, n in self.existing.items()
        }
        return SimpleNamespace(topics=topics, brokers={1: object()})

    def create_topics(self, new, request_timeout: float, operation_timeout: float) -> dict:
        futures = {}
        for topic in new:
            futures[topic.topic] = future = Future()
            if topic.topic in self.refused:
                error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
                future.set_exception(KafkaException(error))
            else:
                self.existing[topic.topic] = topic.num_partitions
                future.set_result(None)
        return futures


def test_topics_without_leaders_are_unreachable_a_retry_after_the_timeout():
    plan = [TopicSpec("words", 2, kind="stream")]
    with pytest.raises(Unreachable, match=r"\['words'\] have no partition leaders after 0.2s"):
        ensure_topics(LeaderlessAdmin({"words": 2}), plan, timeout=0.2)


def test_another_parts_topic_this_principal_may_not_create_is_waited_for_then_retried():
    plan = [TopicSpec("zg.gen.watermarks", 1, kind="watermarks")]
    admin = LeaderlessAdmin({}, refused={"zg.gen.watermarks"})
    with pytest.raises(Retry, match=r"waiting for \['zg.gen.watermarks'\], which their writers"):
        ensure_topics(admin, plan, timeout=0.2, others={"zg.gen.watermarks"})
    with pytest.raises(PipelineError, match="not authorized"):  # its own: the fix is an ACL
        ensure_topics(admin, plan, timeout=0.2)
