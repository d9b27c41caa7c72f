"""Wiring one membership of a part's consumer group, for each runtime a part can name
(`Part.runtime`): the checks and topics before the first, then, for each membership, the Kafka
clients (consumer, admin, producer, readers), the topic limits and ids they describe, and the
collaborators wired to them, handed to the `Membership` that runs the one loop.

- "keyed" (a computation): tasks over its key space, their stores restored from its journals
  and kept warm on standbys, its watermark channels followed, one Kafka transaction a commit.
- "sink": a task per input partition, opened with the sink where its target stands, each
  batch written by the sink with the partition's next offset; no state, no watermark, no
  transaction on Kafka (its dead letters go through an idempotent producer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Message, TopicCollection
from confluent_kafka.admin import AdminClient

from framework.core.computation_spec import ComputationSpec
from framework.core.dead_letters import ErrorPolicy
from framework.core.forgery import pipeline_allowance
from framework.core.part import Part, reader_group
from framework.core.pipeline import Pipeline, PipelineError
from framework.core.sink_spec import SinkSpec
from framework.errors import ForgedRecord
from framework.kafka.collector import Collector
from framework.kafka.config import client_config, consumer_config, producer_config
from framework.kafka.groups import member_client_id
from framework.kafka.limits import DEFAULT_MAX_BYTES, read_limits
from framework.kafka.output import PartIO
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import check_registry
from framework.kafka.topics import create_part_topics
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
from framework.streaming.sink_committer import SinkCommitter
from framework.streaming.sink_task_manager import SinkTaskManager
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


@dataclass(frozen=True)
class Settings:
    """What one `logwheel run` process runs a part with."""

    bootstrap: str
    kafka: dict
    registry: RegistrySettings | None  # the [registry] table of --config, if any
    state_dir: Path  # the part's own directory
    standby: int = 0  # warm replicas of other instances' state, where a part keeps state
    pace: Pace = Pace()


@dataclass(frozen=True)
class Watch:
    """What the process's watchdog and query server share with each membership: the calls it
    watches and those it abandoned (framework/streaming/watchdog.py), and the replicas
    queries read (framework/query/replicas.py)."""

    calls: Calls | None = None
    hung: HungCalls | None = None
    replicas: Replicas | None = None


class KeyedWiring:
    """A computation's memberships."""

    def __init__(self, pipeline: Pipeline, spec: ComputationSpec, settings: Settings) -> None:
        self.pipeline, self.spec, self.s = pipeline, spec, settings
        self.partitions: dict[str, int] = {}

    def check(self) -> None:
        """What must hold before anything is made: its registry answers, its class builds."""
        check_registry(self.pipeline, self.spec, self.s.registry)
        try:
            self.spec.factory()
        except Exception as error:
            raise PipelineError(
                f"computation {self.spec.name!r} cannot be created ({type(error).__name__}: "
                f"{error}): fix its constructor or the factory passed to pipeline.computation"
            ) from error

    def start(self) -> None:
        """Its topics made, and every topic's partition count read."""
        create_part_topics(self.s.bootstrap, self.pipeline, self.spec.name, self.s.kafka)
        self.partitions = partition_counts(self.s.bootstrap, self.s.kafka, self.spec)

    def join(self, instance: str, describe_s: float, watch: Watch) -> Membership:
        """A new membership of the computation's group, subscribed: its transactional producer
        initialized (fencing this instance's earlier one), its clients made with the process's
        Kafka settings."""
        pipeline, spec, s = self.pipeline, self.spec, self.s
        instance = f"{spec.group}.{instance}"
        admin = AdminClient(client_config(s.bootstrap, s.kafka))
        txn_id = instance if spec.exactly_once else None
        written = [*spec.outputs, spec.changelog, spec.dlq, *spec.keyed_topics]
        collector = _collector(s, admin, txn_id, written, describe_s)
        member = {"client.id": member_client_id(s.standby), **_quiet(s.kafka)}  # its standbys
        consumer = Consumer(
            consumer_config(s.bootstrap, group=spec.group, instance=instance, extra=member)
        )
        committer = Committer(spec, collector, consumer, instance)
        reader = consumer_config(
            s.bootstrap, reader=reader_group(spec.group), extra=_quiet(s.kafka)
        )

        def dead_letter_forged(msg: Message, forged: ForgedRecord) -> None:
            membership.dead_letter_forged(msg, forged)  # made below, before any record is read

        checked = [*spec.outputs, *spec.consumed_topics]
        channels = WatermarkChannels(
            Consumer(dict(reader)),
            admin,
            allowance_ms=pipeline_allowance(pipeline),
            counts={t: self.partitions[t] for t in checked if t in self.partitions},
            refuse=dead_letter_forged,
        )
        restorer = Restorer(
            Consumer(dict(reader)),
            spec,
            _topic_ids(admin, spec, describe_s),
            refuse=dead_letter_forged,
        )
        io = PartIO(
            pipeline,
            spec,
            collector,
            self.partitions,
            ErrorPolicy(spec.group, spec.on_error),
            s.registry,
        )
        readers = lambda: Consumer(dict(reader))  # noqa: E731
        tables = table_set(readers, pipeline, spec, s.state_dir, self.partitions, s.registry)
        tasks = TaskManager(
            io, consumer, admin, channels, restorer, s.state_dir, tables, s.standby,
            watch.calls, watch.hung, watch.replicas,
        )  # fmt: skip
        channels.follow([spec.watermarks, *spec.channels_followed(pipeline)])
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
            pace=s.pace,
            hung=watch.hung,
        )
        return membership


class SinkWiring:
    """A sink's memberships."""

    def __init__(self, pipeline: Pipeline, spec: SinkSpec, settings: Settings) -> None:
        self.pipeline, self.spec, self.s = pipeline, spec, settings
        self._started = False

    def check(self) -> None:
        """What must hold before anything is made: its registry answers, if it reads through
        one."""
        check_registry(self.pipeline, self.spec, self.s.registry)

    def start(self) -> None:
        """Its topics made; then, once, the sink told its name (`Sink.start`, if it has one)
        before its first `open`."""
        create_part_topics(self.s.bootstrap, self.pipeline, self.spec.name, self.s.kafka)
        start = getattr(self.spec.sink, "start", None)  # optional in the sink protocol
        if callable(start) and not self._started:
            start(self.spec.name)
            self._started = True

    def join(self, instance: str, describe_s: float, watch: Watch) -> Membership:
        """A new membership of the sink's group, subscribed; its partitions are opened with the
        sink in the loop."""
        spec, s = self.spec, self.s
        instance = f"{spec.group}.{instance}"
        admin = AdminClient(client_config(s.bootstrap, s.kafka))
        collector = _collector(s, admin, None, [spec.dlq], describe_s)
        consumer = Consumer(
            consumer_config(s.bootstrap, group=spec.group, instance=instance, extra=_quiet(s.kafka))
        )
        io = PartIO(self.pipeline, spec, collector, {}, ErrorPolicy(spec.group, spec.on_error),
                    s.registry)  # fmt: skip
        return sink_membership(io, consumer, admin, instance, s.pace, watch.calls)


def sink_membership(
    io: PartIO,
    consumer: Consumer,
    admin: AdminClient,
    instance: str,
    pace: Pace,
    calls: Calls | None = None,
) -> Membership:
    """A membership of a sink's group on the clients given (stand-ins, in a unit test)."""
    spec = io.spec
    holds = Holds(spec, consumer)
    return Membership(
        io,
        consumer=consumer,
        committer=SinkCommitter(spec.group, spec.name, consumer, instance),
        tasks=SinkTaskManager(io, consumer, holds, calls),
        channels=None,
        restorer=None,
        tables=None,
        refused_records=RefusedRecords(io, admin),
        holds=holds,
        meter=Meter(spec.name, consumer, io.collector),
        pace=pace,
        hung=None,  # a sink runs no hook per record: nothing of it is abandoned
    )


WIRINGS = {"keyed": KeyedWiring, "sink": SinkWiring}
"""The wiring of each runtime a part may name (`Part.runtime`)."""


def wiring_for(pipeline: Pipeline, part: Part, settings: Settings) -> KeyedWiring | SinkWiring:
    """How `logwheel run` runs `part`; a configuration error if it runs none."""
    wiring = WIRINGS.get(part.runtime or "")
    if wiring is None:
        runnable = [p.name for p in pipeline.parts() if p.runtime in WIRINGS]
        raise PipelineError(
            f"{part.kind} {part.name!r} of pipeline {pipeline.name!r} is not run by "
            f"`logwheel run`; it runs {', '.join(runnable)}"
        )
    return wiring(pipeline, part, settings)


def _collector(
    s: Settings, admin: AdminClient, txn_id: str | None, written: list[str], describe_s: float
) -> Collector:
    """The membership's producer (transactional with `txn_id`), with the limits of the topics
    it writes as the broker describes them."""
    # Every commit flushes (which sends at once whatever lingers), so a runner's outputs are
    # never later for lingering 5 ms rather than 1: fewer, larger batches under a backlog.
    extra = {"linger.ms": 5, **s.kafka}
    config = producer_config(s.bootstrap, transactional_id=txn_id, extra=extra)
    max_bytes = int(config.get("message.max.bytes", DEFAULT_MAX_BYTES))
    limits = read_limits(admin, written, max_bytes, request_timeout=describe_s)
    return Collector(config, limits)


def _quiet(kafka: dict) -> dict:
    """This process's consumers wait longer at the broker than the 20 ms default: a fetch
    returns as soon as a record (or a transaction's end) arrives anyway, and five times fewer
    empty round trips keep an idle process's client threads quiet."""
    return {"fetch.wait.max.ms": IDLE_FETCH_WAIT_MS, **kafka}


def partition_counts(bootstrap: str, kafka: dict, spec: ComputationSpec) -> dict[str, int]:
    """Every topic's partition count; a configuration error naming the fix where a table or
    an input read by its Kafka key is not co-partitioned with the computation's key space."""
    admin = AdminClient(client_config(bootstrap, kafka))
    topics = admin.list_topics(timeout=30).topics
    counts = {name: len(meta.partitions) for name, meta in topics.items()}
    for name, topic in spec.tables.items():
        if counts.get(topic) != spec.partitions:
            raise PipelineError(
                f"{spec.group} joins table {name!r} ({topic}), which must have "
                f"{spec.partitions} partitions like its key space but has "
                f"{counts.get(topic, 'none (it does not exist)')}: co-partition them "
                "(same partition count and keys) or create the topic"
            )
    for name, table in spec.global_tables.items():
        if table.topic not in counts:
            raise PipelineError(
                f"{spec.group} reads global table {name!r} from {table.topic!r}, which does "
                "not exist: create the topic (or fix its name)"
            )
    for i in spec.inputs:
        if i.key is None and counts.get(i.stream) != spec.partitions:
            raise PipelineError(
                f"{spec.group} reads {i.stream!r} by its Kafka key, so it needs "
                f"{spec.partitions} partitions like its state but it has "
                f"{counts.get(i.stream, 'none (it does not exist)')}: give the input key_by(...) "
                "or recreate the topic"
            )
    return counts


def _topic_ids(admin: AdminClient, spec: ComputationSpec, timeout: float) -> dict[str, str]:
    """Ids of the journal topics, so a store can tell a topic created again from its own."""
    topics = list(spec.journals.values())
    described = admin.describe_topics(TopicCollection(topics), request_timeout=timeout)
    return {name: str(future.result(30).topic_id) for name, future in described.items()}
