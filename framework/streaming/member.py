"""One membership of a computation's consumer group: the clients it holds, what the group's
rebalance callbacks do, the commit of what its tasks did, and leaving.

The callbacks only register what changed (Kafka Streams' rule: never restore in a callback);
the task manager restores inside the loop. A revocation commits first, a loss does not — the
partitions are someone else's already, and the transaction would be fenced.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from framework.core.dead_letters import ErrorPolicy
from framework.core.forgery import pipeline_allowance
from framework.core.metrics import REBALANCES
from framework.core.pipeline import ComputationSpec, Pipeline
from framework.core.watermarks import partition_watermark
from framework.errors import ForgedRecord, Rejoin, Retry
from framework.kafka.collector import Collector
from framework.kafka.config import client_config, consumer_config, producer_config, reader_group
from framework.kafka.limits import DEFAULT_MAX_BYTES, read_limits
from framework.kafka.output import ComputationIO
from framework.kafka.registry_settings import RegistrySettings
from framework.state.restore import Restorer
from framework.state.tables import Tables
from framework.streaming.channels import WatermarkChannels
from framework.streaming.committer import Committer
from framework.streaming.holds import Holds
from framework.streaming.isolation import Isolation
from framework.streaming.meter import Meter
from framework.streaming.task_manager import TaskManager

log = logging.getLogger(__name__)
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


class Member:
    """One membership of the consumer group: its clients, task manager, committer."""

    def __init__(
        self,
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
    ) -> None:
        self.pipeline, self.spec = pipeline, spec
        instance = f"{spec.group}.{instance}"
        admin = AdminClient(client_config(bootstrap, kafka))
        txn_id = instance if spec.exactly_once else None
        # Every commit flushes (which sends at once whatever lingers), so a runner's outputs are
        # never later for lingering 5 ms rather than 1: fewer, larger batches under a backlog.
        config = producer_config(
            bootstrap, transactional_id=txn_id, extra={"linger.ms": 5, **kafka}
        )
        limits = read_limits(
            admin,
            [*spec.outputs, spec.changelog, spec.dlq, *spec.keyed_topics],
            int(config.get("message.max.bytes", DEFAULT_MAX_BYTES)),
            request_timeout=describe_s,
        )
        self.collector = Collector(config, limits)
        # This process's consumers wait longer at the broker than the 20 ms default: a fetch
        # returns as soon as a record (or a transaction's end) arrives anyway, and five times
        # fewer empty round trips keep an idle process's client threads quiet.
        quiet = {"fetch.wait.max.ms": IDLE_FETCH_WAIT_MS, **kafka}
        self.consumer = Consumer(
            consumer_config(bootstrap, group=spec.group, instance=instance, extra=quiet)
        )
        self.committer = Committer(spec, self.collector, self.consumer, instance)
        reader = consumer_config(bootstrap, reader=reader_group(spec.group), extra=quiet)
        checked = [*spec.outputs, *spec.consumed_topics]
        self.channels = WatermarkChannels(
            dict(reader),
            admin,
            allowance_ms=pipeline_allowance(pipeline),
            counts={t: partitions[t] for t in checked if t in partitions},
            refuse=self._refused,
        )
        self.restorer = Restorer(
            Consumer(dict(reader)), spec, _topic_ids(admin, spec, describe_s), refuse=self._refused
        )
        self.rt = ComputationIO(
            pipeline,
            spec,
            self.collector,
            partitions,
            ErrorPolicy(spec.group, spec.on_error),
            registry,
        )
        self.tables = (
            Tables(Consumer(dict(reader)), pipeline, spec, state_dir, registry)
            if spec.tables
            else None
        )
        self.tasks = TaskManager(
            self.rt,
            self.consumer,
            admin,
            self.channels,
            self.restorer,
            state_dir,
            self.tables,
            standby,
        )
        self.isolation = Isolation(self.rt, admin)
        self.holds = Holds(spec, self.consumer)
        self.meter = Meter(spec.name, self.consumer, self.collector)
        self.dirty = False  # something to commit
        self.lost = False
        self.rewind = False  # an aborted commit: re-run from the last committed state
        self.failure: BaseException | None = None  # met in a rebalance callback
        self.channels.follow(self._channels())
        self.consumer.subscribe(
            spec.consumed_topics,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _refused(self, msg: Message, forged: ForgedRecord) -> None:
        """A forged mark or timer entry: dead-lettered in the next commit."""
        self.rt.output.dead_letter(None, forged, forged.stage, msg)
        self.dirty = True

    def _channels(self) -> list[str]:
        """Every watermark channel this computation's tasks learn from, and its own."""
        channels = [self.spec.watermarks]
        for i in self.spec.inputs:
            channels += partition_watermark(self.pipeline, i.stream, i.stream, 0)[1]
        return channels

    # -- rebalance callbacks: register, never restore --------------------------------------
    # An exception must not leave a callback through the client: confluent-kafka keeps it
    # in C across the call it re-raises from (confluentinc/confluent-kafka-python#729), and
    # measured here it then held a whole ended membership alive (clients, threads, open
    # stores). The callback keeps it; `raise_failure` raises it after the client returns.

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept():
            if tps:
                REBALANCES.labels(self.spec.name, "assigned").inc()
                self.tasks.assigned(tps)

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept():
            if not self.lost:
                self.commit()
            if tps:
                REBALANCES.labels(self.spec.name, "revoked").inc()
            self.tasks.revoked(tps)

    def _on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept():
            self.lost = True
            REBALANCES.labels(self.spec.name, "lost").inc()
            self.tasks.revoked(tps)

    @contextmanager
    def _kept(self) -> Iterator[None]:
        try:
            yield
        except BaseException as error:  # noqa: BLE001 - raised again by `raise_failure`
            self.failure = self.failure or error

    def raise_failure(self) -> None:
        """Raise what a rebalance callback met during the last client call, if anything."""
        failure, self.failure = self.failure, None
        if failure is not None:
            raise failure

    def commit(self) -> None:
        """Commit what the tasks did since the last commit; an aborted commit rewinds them."""
        if not self.dirty:
            return
        self.dirty = False
        committed = self.committer.commit(self.tasks.running(), self.tasks.inputs())
        self.isolation.committed(committed, self.committer.refusal)
        if not committed:
            self.rewind = True

    def close(self, clean: bool) -> None:
        """Leave the group; a clean close commits first and delivers what is in flight, an
        unclean one aborts and leaves the producer alone: what it holds is either in the
        aborted transaction or produced again after the rejoin, and the delivery reports of
        a fenced producer's flush can fail inside confluent-kafka (SystemError in the
        callback), which ended the process."""
        if not clean:
            self.lost = True  # no commit from the revocation the close triggers
            self.committer.abandon()
        try:
            self.consumer.close()
            self.raise_failure()
        except (KafkaException, KafkaError, RuntimeError, Rejoin, Retry) as error:
            log.warning("%s: closing the consumer: %s", self.spec.group, error)
        finally:  # the stores, whatever happened: the next membership opens them again
            self.tasks.close()
        self.channels.close()
        self.restorer.consumer.close()
        self.committer.close()
        if clean:
            self.collector.producer.flush(10)


def _topic_ids(admin: AdminClient, spec: ComputationSpec, timeout: float) -> dict[str, str]:
    """Ids of the journal topics, so a store can tell a topic created again from its own."""
    topics = list(spec.journals.values())
    described = admin.describe_topics(TopicCollection(topics), request_timeout=timeout)
    return {name: str(future.result(30).topic_id) for name, future in described.items()}
