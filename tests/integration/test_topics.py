"""`create_topics` against a real broker: idempotent, with each topic's policy, and refusing
existing topics that would break the runtime."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from framework.core.api import Computation
from framework.core.pipeline import InjectorWatermark, Pipeline, PipelineError, key_by
from framework.kafka.topics import create_topics, pipeline_topics


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def pipeline(name: str) -> Pipeline:
    p = Pipeline(name, partitions=3)
    p.source(f"{name}-queries", watermark=InjectorWatermark("gen"))
    p.computation(
        "count",
        Noop,
        inputs={f"{name}-queries": key_by("query")},
        outputs={f"{name}-counts": "zeitgeist.WindowResult"},
    )
    p.computation("detect", Noop, inputs={f"{name}-counts": None}, partitions=2)
    return p


def configs(admin: AdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    futures = admin.describe_configs(resources, request_timeout=30)
    return {r.name: {k: e.value for k, e in f.result().items()} for r, f in futures.items()}


def test_creates_every_topic_with_its_policy_once(kafka, unique):
    p = pipeline(unique("tp"))
    plan = pipeline_topics(p)

    created = create_topics(kafka, p)
    assert sorted(created) == sorted(t.name for t in plan)
    assert create_topics(kafka, p) == []  # idempotent

    admin = AdminClient({"bootstrap.servers": kafka})
    metadata = admin.list_topics(timeout=30).topics
    found = configs(admin, [t.name for t in plan])
    for topic in plan:
        assert len(metadata[topic.name].partitions) == topic.partitions, topic.name
        for key, value in topic.config.items():
            assert found[topic.name][key] == value, (topic.name, key)

    name = p.name
    for suffix in ("count.changelog", "count.timers", "count.watermarks", "gen.watermarks"):
        assert found[f"{name}.{suffix}"]["cleanup.policy"] == "compact"
    assert found[f"{name}-queries"]["cleanup.policy"] == "delete"
    assert found[f"{name}.count.{name}-queries.by-key"]["cleanup.policy"] == "delete"
    assert len(metadata[f"{name}.count.changelog"].partitions) == 3
    assert len(metadata[f"{name}.detect.changelog"].partitions) == 2
    assert len(metadata[f"{name}-counts"].partitions) == 2  # read by Kafka key by detect
    assert len(metadata[f"{name}.count.watermarks"].partitions) == 1


def test_existing_streams_are_kept(kafka, unique, create_topic):
    p = pipeline(unique("tp"))
    create_topic(f"{p.name}-queries", partitions=1)  # re-keyed input: any count serves
    created = create_topics(kafka, p)
    assert f"{p.name}-queries" not in created
    assert len(created) == len(pipeline_topics(p)) - 1


def test_changelog_with_too_few_partitions_is_refused(kafka, unique, create_topic):
    p = pipeline(unique("tp"))
    create_topic(f"{p.name}.count.changelog", partitions=1, config={"cleanup.policy": "compact"})
    with pytest.raises(PipelineError, match=r"has 1 partitions.*partitions=1"):
        create_topics(kafka, p)
    metadata = AdminClient({"bootstrap.servers": kafka}).list_topics(timeout=30).topics
    assert f"{p.name}.count.timers" not in metadata  # refused before creating anything


def test_timer_journal_that_deletes_is_refused(kafka, unique, create_topic):
    p = pipeline(unique("tp"))
    create_topic(f"{p.name}.count.timers", partitions=3, config={"cleanup.policy": "delete"})
    with pytest.raises(PipelineError, match="cleanup.policy=compact"):
        create_topics(kafka, p)
