"""The topics a pipeline needs, each with its policy, and creating them (`logwheel topics`).

Every edge of the graph and every piece of durable state is a Kafka topic: each stream, and the
topics each part keeps for itself (framework/core/part.py). `pipeline_topics` is the plan, a
pure function of the declaration; `create_topics` makes what is missing and refuses, with the
fix in the message, an existing topic that would break the runtime (too few partitions for
state, or deleting where it must compact).

Partition counts that must match exactly are those of keyed state: a task owns partition p of
its changelog, timer journal and by-key topics, and, for an input read by its Kafka key, the
same partition p of that input (co-partitioning, as Kafka Streams checks). Other streams may
have any number of partitions; the plan only says what to create them with.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from framework.core.pipeline import Pipeline, PipelineError
from framework.errors import Retry
from framework.kafka.errors import Unreachable

HOUR_MS = 3_600_000
MAX_REPLICAS = 3
RESULT_MARGIN_S = 10
"""How long past its own timeout an admin request's answer is waited for."""
"""A new topic's default replication factor on a cluster of this many brokers or more."""
MIN_INSYNC_REPLICAS = 2
"""Replicas that must have a write before it is acknowledged, on topics of 3 replicas or more."""

DELETE: Mapping[str, str] = {"cleanup.policy": "delete"}
"""Streams, repartition topics and dead letters: a time-bounded log (broker's retention)."""

COMPACT: Mapping[str, str] = {
    "cleanup.policy": "compact",
    # Nothing reads superseded values of a key: restore and tables want only the latest.
    # Explicit so that a broker-wide default cannot delay compaction.
    "min.compaction.lag.ms": "0",
    # The active segment is never compacted. With the broker's 7-day default, a changelog
    # would carry up to a week of overwrites that every restore must read; one hour bounds
    # that tail while keeping segments few (24 a day per partition, merged by the cleaner).
    "segment.ms": str(HOUR_MS),
}
"""Changelogs, timer journals and watermark channels: the latest value per key is the truth."""

DLQ: Mapping[str, str] = dict(DELETE)
"""Dead letters follow the broker's retention, like the streams they came from: a shorter
one would lose bad input before the input itself expires."""


REPLAY: Mapping[str, str] = {"cleanup.policy": "delete", "retention.ms": "-1"}
"""Dead letters sent back (`logwheel dlq replay`) keep their original, perhaps old, timestamps:
a time-bounded retention could delete them before the computation reads them."""


@dataclass(frozen=True)
class TopicSpec:
    """One topic of the plan: its name, partition count and topic-level configs.

    `kind` says what it carries (stream, changelog, timers, watermarks, by-key, dlq, replay,
    replayed);
    `exact` says its partition count must equal `partitions` because keyed state, a
    co-partitioned reader or a single-partition channel depends on it; `owners` are the
    computations that depend on it (for messages).
    """

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    kind: str = "stream"
    exact: bool = False
    owners: tuple[str, ...] = ()

    @property
    def compacted(self) -> bool:
        return "compact" in self.config.get("cleanup.policy", "")


POLICY_CONFIGS: Mapping[str, Mapping[str, str]] = {
    "compact": COMPACT,
    "delete": DELETE,
    "dlq": DLQ,
    "replay": REPLAY,
}
"""The topic configs of each policy a part names for its own topics (framework/core/part.py)."""


def pipeline_topics(pipeline: Pipeline) -> list[TopicSpec]:
    """Every topic of `pipeline` with its policy, streams first, then each part's own, in
    declaration order.

    A stream gets the partitions of the computations reading it by Kafka key (they must
    agree), else of its writers, else the pipeline's default.
    """
    plan: dict[str, TopicSpec] = {}

    def add(spec: TopicSpec) -> None:
        if spec.name in plan and plan[spec.name] != spec:
            raise PipelineError(
                f"topic {spec.name!r} is planned twice, as {plan[spec.name].kind} and "
                f"{spec.kind}: rename the stream or computation"
            )
        plan[spec.name] = spec

    for stream in pipeline.streams():
        add(_stream_topic(pipeline, stream))
    for part in pipeline.parts():
        for own in part.own_topics():
            config = dict(POLICY_CONFIGS[own.policy])
            add(TopicSpec(own.name, own.partitions, config, own.kind, own.exact, (part.name,)))
    return list(plan.values())


def part_topics(pipeline: Pipeline, part: str) -> list[TopicSpec]:
    """The topics of the plan that part `part` uses: those its grants name — its own, the
    streams it reads and writes, the watermark channels it follows. `run` and `reset` of one
    part create only these, so a principal with that part's ACLs alone can do it."""
    grants = pipeline.part(part).grants(pipeline)
    names = {g.name for g in grants if g.resource == "TOPIC" and g.pattern == "LITERAL"}
    prefixes = tuple(g.name for g in grants if g.resource == "TOPIC" and g.pattern == "PREFIXED")
    return [s for s in pipeline_topics(pipeline) if s.name in names or s.name.startswith(prefixes)]


def _stream_topic(pipeline: Pipeline, stream: str) -> TopicSpec:
    direct = {  # the parts whose key space is the stream's partitions
        c.name: c.partitions
        for c in pipeline.parts()
        if c.partitions and any(i.stream == stream and i.key is None for i in c.inputs)
    }
    if len(set(direct.values())) > 1:
        raise PipelineError(
            f"stream {stream!r} is read by its Kafka key by computations with different "
            f"partition counts {direct}: give them the same partitions=, or key_by(...) "
            "in all but one"
        )
    if direct:
        partitions = next(iter(direct.values()))
        return TopicSpec(stream, partitions, dict(DELETE), "stream", True, tuple(direct))
    writers = [w.partitions for w in pipeline.writers(stream)]
    partitions = max(writers) if writers else pipeline.partitions
    return TopicSpec(stream, partitions, dict(DELETE), "stream")


def check_existing(spec: TopicSpec, partitions: int, cleanup_policy: str | None) -> str | None:
    """Why an existing topic with these properties cannot serve as `spec`, with the fix;
    None if it can."""
    if spec.exact and partitions != spec.partitions:
        have = f"topic {spec.name!r} has {partitions} partitions, but"
        owners = ", ".join(repr(o) for o in spec.owners)
        if spec.kind == "stream":
            return (
                f"{have} {owners} read it by its Kafka key with {spec.partitions} partitions "
                f"of state: declare them with partitions={partitions}, or read it with "
                "key_by(...) so it is repartitioned"
            )
        if spec.kind == "watermarks":
            return (
                f"{have} a watermark channel has exactly 1: delete it "
                f"(kafka-topics.sh --delete --topic {spec.name}) so it is recreated"
            )
        return (
            f"{have} computation {owners} is declared with partitions={spec.partitions}: "
            f"move its state there with `logwheel rescale MODULE:ATTR --computation "
            f"{spec.owners[0] if spec.owners else '...'} --partitions {spec.partitions}`, "
            f"or declare it with partitions={partitions}"
        )
    if cleanup_policy is not None and spec.compacted and "compact" not in cleanup_policy:
        return (
            f"topic {spec.name!r} has cleanup.policy={cleanup_policy}, but it holds "
            f"{spec.kind}, which must be compacted or it is lost at retention: "
            f"kafka-configs.sh --alter --entity-type topics --entity-name {spec.name} "
            "--add-config cleanup.policy=compact"
        )
    return None


def create_topics(
    bootstrap: str,
    pipeline: Pipeline,
    *,
    client_config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
    part: str | None = None,
    replication_factor: int | None = None,
) -> list[str]:
    """Create the topics of `pipeline` (with `part`, of that computation or injector alone:
    `part_topics`) that do not exist yet; return the names created.

    Idempotent: existing topics are kept as they are, provided they can serve (see
    `check_existing`); otherwise PipelineError names the fix and nothing is created. Returns
    once every planned topic has a leader for each partition. New topics get
    `replication_factor` replicas, by default one per broker up to 3 (`replication_for`).
    """
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**dict(client_config or {}), "bootstrap.servers": bootstrap})
    if part is None:
        return ensure_topics(
            admin, pipeline_topics(pipeline), timeout, replication_factor=replication_factor
        )
    plan = part_topics(pipeline, part)
    own = {t.name for t in pipeline.part(part).own_topics()}
    others = {s.name for s in plan if s.kind == "watermarks" and s.name not in own}
    return ensure_topics(admin, plan, timeout, others=others, replication_factor=replication_factor)


def create_part_topics(
    bootstrap: str, pipeline: Pipeline, part: str, client_config: Mapping[str, Any] | None
) -> list[str]:
    """What `run` of one computation and an injector create: the whole plan where the
    principal may (one principal for the job, or none: every topic exists before any part
    needs it, as before), else its own part's alone (a least-privilege principal, refused
    another part's topics, whose own principal creates them)."""
    try:
        return create_topics(bootstrap, pipeline, client_config=client_config)
    except PipelineError:
        return create_topics(bootstrap, pipeline, client_config=client_config, part=part)


def replication_for(
    brokers: int, replication_factor: int | None = None
) -> tuple[int, dict[str, str]]:
    """The replicas of a new topic on a cluster of `brokers` live brokers, and the topic
    configs that go with them: `replication_factor` (by default one per broker, up to 3), and
    from 3 replicas `min.insync.replicas` 2, so that an acknowledged write survives the loss
    of a broker and one broker may be down while writes go on. Below 3 replicas the broker's
    default stays."""
    replicas = replication_factor or max(1, min(brokers, MAX_REPLICAS))
    if replicas > brokers:
        raise PipelineError(
            f"replication factor {replicas} needs {replicas} brokers, but the cluster has "
            f"{brokers} up: give --replication-factor {brokers} or start the missing brokers"
        )
    insync = {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)} if replicas >= MAX_REPLICAS else {}
    return replicas, insync


def ensure_topics(
    admin: Any,
    plan: list[TopicSpec],
    timeout: float = 30.0,
    others: Collection[str] = (),
    replication_factor: int | None = None,
) -> list[str]:
    """`create_topics` for the topics in `plan`, with an admin client of the caller's.
    `others` are another part's topics (an upstream watermark channel): where this principal
    may not create one, its owner will, and this waits for it (Retry after `timeout`)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    metadata = admin.list_topics(timeout=timeout)
    existing = metadata.topics
    present = [s for s in plan if s.name in existing]
    policies = _cleanup_policies(admin, [s.name for s in present if s.compacted], timeout)
    problems = [
        why
        for s in present
        if (why := check_existing(s, len(existing[s.name].partitions), policies.get(s.name)))
    ]
    if problems:
        raise PipelineError("; ".join(problems))

    missing = [s for s in plan if s.name not in existing]
    created: list[str] = []
    awaited: list[str] = []
    if missing:
        replicas, insync = replication_for(len(metadata.brokers), replication_factor)
        new = [
            NewTopic(s.name, s.partitions, replicas, config={**insync, **s.config}) for s in missing
        ]
        futures = admin.create_topics(new, request_timeout=timeout, operation_timeout=timeout)
        for name, future in futures.items():
            try:
                future.result(timeout + RESULT_MARGIN_S)  # past it: TimeoutError, Unreachable
                created.append(name)
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and name in others:
                    awaited.append(name)
                elif error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise PipelineError(
                        f"cannot create topic {name!r}: not authorized to see or create it: "
                        "grant this client's principal the pipeline's ACLs (`logwheel acls "
                        "MODULE:ATTR --principal ...`), or create it as an administrator"
                    ) from None
                elif error.code() != KafkaError.TOPIC_ALREADY_EXISTS:  # a concurrent creator won
                    raise PipelineError(f"cannot create topic {name!r}: {error.str()}") from None
    try:
        _wait_for_leaders(admin, {s.name: s for s in plan}, timeout)
    except Unreachable as error:
        if not awaited:
            raise
        raise Retry(f"{error}: waiting for {awaited}, which their writers create") from None
    return created


def _cleanup_policies(admin: Any, names: list[str], timeout: float) -> dict[str, str]:
    if not names:
        return {}
    from confluent_kafka.admin import ConfigResource, ResourceType

    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    result = admin.describe_configs(resources, request_timeout=timeout)
    return {
        resource.name: future.result(timeout)["cleanup.policy"].value
        for resource, future in result.items()
    }


def _wait_for_leaders(admin: Any, plan: Mapping[str, TopicSpec], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        topics = admin.list_topics(timeout=timeout).topics
        waiting = sorted(
            name
            for name in plan
            if name not in topics
            or topics[name].error is not None
            or not topics[name].partitions
            or any(p.leader < 0 for p in topics[name].partitions.values())
        )
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise Unreachable(f"topics {waiting} have no partition leaders after {timeout}s")
        time.sleep(0.1)
