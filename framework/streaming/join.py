"""Joining a computation's consumer group: the Kafka clients of one membership (consumer,
admin, transactional producer, readers), the topic limits and ids they describe, and the
collaborators wired to them, handed to a `Membership` that runs the loop."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Message, TopicCollection
from confluent_kafka.admin import AdminClient

from framework.core.dead_letters import ErrorPolicy
from framework.core.forgery import pipeline_allowance
from framework.core.part import reader_group
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.errors import ForgedRecord
from framework.kafka.collector import Collector
from framework.kafka.config import client_config, consumer_config, producer_config
from framework.kafka.groups import member_client_id
from framework.kafka.limits import DEFAULT_MAX_BYTES, read_limits
from framework.kafka.output import ComputationIO
from framework.kafka.registry_settings import RegistrySettings
from framework.query.replicas import Replicas
from framework.state.global_tables import table_set
from framework.state.restore import Restorer
from framework.streaming.calls import Calls
from framework.streaming.channels import WatermarkChannels
from framework.streaming.committer import Committer
from framework.streaming.holds import Holds
from framework.streaming.hung_calls import HungCalls
from framework.streaming.membership import Membership, Pace
from framework.streaming.meter import Meter
from framework.streaming.refused_records import RefusedRecords
from framework.streaming.task_manager import TaskManager

IDLE_FETCH_WAIT_MS = 100
DESCRIBE_TIMEOUT_S = 5
"""librdkafka sends DescribeTopics and DescribeConfigs to the broker its metadata names
controller: a killed one, until the cluster fences it, and the request then waited 30 s (three
brokers; the join after the transaction coordinator's broker was SIGKILLed, whose stall was
43 s). A join that times out sooner is tried again with new clients and fresh metadata."""
DESCRIBE_TIMEOUT_MAX_S = 30
"""The bound of a join's describe requests after joins in a row timed out (doubled from
DESCRIBE_TIMEOUT_S each time): a broker under load may answer DescribeConfigs slower than 5 s
every time, and a fixed 5 s then failed every join on a single broker in `make test`."""


def describe_timeout(failed_joins: int) -> float:
    """The bound of a join's describe requests after `failed_joins` joins in a row failed."""
    return min(DESCRIBE_TIMEOUT_MAX_S, DESCRIBE_TIMEOUT_S * 2**failed_joins)


def join(
    pipeline: Pipeline,
    spec: ComputationSpec,
    *,
    bootstrap: str,
    kafka: dict,
    partitions: dict[str, int],
    instance: str,
    state_dir: Path,
    standby: int,
    registry: RegistrySettings | None = None,
    describe_s: float = DESCRIBE_TIMEOUT_S,
    pace: Pace = Pace(),  # noqa: B008 - frozen
    calls: Calls | None = None,
    hung: HungCalls | None = None,
    replicas: Replicas | None = None,
) -> Membership:
    """A new membership of `spec`'s group, subscribed: its transactional producer initialized
    (fencing this instance's earlier one), its clients made with `kafka`'s settings; `calls`
    and `hung` are the process's watchdog's (framework/streaming/watchdog.py); `replicas`, what
    the process's query server reads (framework/query/replicas.py)."""
    instance = f"{spec.group}.{instance}"
    admin = AdminClient(client_config(bootstrap, kafka))
    txn_id = instance if spec.exactly_once else None
    # Every commit flushes (which sends at once whatever lingers), so a runner's outputs are
    # never later for lingering 5 ms rather than 1: fewer, larger batches under a backlog.
    config = producer_config(bootstrap, transactional_id=txn_id, extra={"linger.ms": 5, **kafka})
    limits = read_limits(
        admin,
        [*spec.outputs, spec.changelog, spec.dlq, *spec.keyed_topics],
        int(config.get("message.max.bytes", DEFAULT_MAX_BYTES)),
        request_timeout=describe_s,
    )
    collector = Collector(config, limits)
    # This process's consumers wait longer at the broker than the 20 ms default: a fetch
    # returns as soon as a record (or a transaction's end) arrives anyway, and five times
    # fewer empty round trips keep an idle process's client threads quiet.
    quiet = {"fetch.wait.max.ms": IDLE_FETCH_WAIT_MS, **kafka}
    member = {"client.id": member_client_id(standby), **quiet}  # its standbys, for `ui`
    consumer = Consumer(
        consumer_config(bootstrap, group=spec.group, instance=instance, extra=member)
    )
    committer = Committer(spec, collector, consumer, instance)
    reader = consumer_config(bootstrap, reader=reader_group(spec.group), extra=quiet)

    def dead_letter_forged(msg: Message, forged: ForgedRecord) -> None:
        membership.dead_letter_forged(msg, forged)  # made below, before any record is read

    checked = [*spec.outputs, *spec.consumed_topics]
    channels = WatermarkChannels(
        Consumer(dict(reader)),
        admin,
        allowance_ms=pipeline_allowance(pipeline),
        counts={t: partitions[t] for t in checked if t in partitions},
        refuse=dead_letter_forged,
    )
    restorer = Restorer(
        Consumer(dict(reader)),
        spec,
        _topic_ids(admin, spec, describe_s),
        refuse=dead_letter_forged,
    )
    io = ComputationIO(
        pipeline, spec, collector, partitions, ErrorPolicy(spec.group, spec.on_error), registry
    )
    readers = lambda: Consumer(dict(reader))  # noqa: E731
    tables = table_set(readers, pipeline, spec, state_dir, partitions, registry)
    tasks = TaskManager(
        io, consumer, admin, channels, restorer, state_dir, tables, standby, calls, hung, replicas
    )
    channels.follow(_channels(pipeline, spec))
    membership = Membership(
        io,
        consumer=consumer,
        committer=committer,
        tasks=tasks,
        channels=channels,
        restorer=restorer,
        tables=tables,
        refused_records=RefusedRecords(io, admin),
        holds=Holds(spec, consumer),
        meter=Meter(spec.name, consumer, collector),
        pace=pace,
        hung=hung,
    )
    return membership


def _channels(pipeline: Pipeline, spec: ComputationSpec) -> list[str]:
    """Every watermark channel this computation's tasks learn from, and its own."""
    return [spec.watermarks, *spec.channels_followed(pipeline)]


def _topic_ids(admin: AdminClient, spec: ComputationSpec, timeout: float) -> dict[str, str]:
    """Ids of the journal topics, so a store can tell a topic created again from its own."""
    topics = list(spec.journals.values())
    described = admin.describe_topics(TopicCollection(topics), request_timeout=timeout)
    return {name: str(future.result(30).topic_id) for name, future in described.items()}
