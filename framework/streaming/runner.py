"""One `logwheel run` process for one computation (Kafka Streams' StreamThread): a `Runner`
rejoins the group as often as a membership ends; a `Member` is one membership, whose loop polls,
routes records to tasks (`task_manager`), fires timers and commits (`committer`) — one Kafka
transaction per commit holding productions, journals, marks and input offsets (invariant 1).
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import threading
import time
import uuid
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
from framework.core.metrics import REBALANCES
from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.core.watermarks import partition_watermark
from framework.errors import BadRecord, Rejoin
from framework.kafka.collector import Collector
from framework.kafka.config import (
    client_config,
    consumer_config,
    producer_config,
    reader_group,
    unreachable,
)
from framework.kafka.limits import DEFAULT_MAX_BYTES, read_limits
from framework.kafka.output import Runtime
from framework.kafka.topics import create_topics
from framework.state.restore import Restorer
from framework.state.tables import Tables
from framework.streaming.channels import WatermarkChannels
from framework.streaming.committer import Committer
from framework.streaming.meter import Meter
from framework.streaming.task import InputPartition, Task
from framework.streaming.task_manager import TaskManager

log = logging.getLogger(__name__)

DEFAULT_COMMIT_INTERVAL_MS = 1000
"""How long a runner working off a backlog goes between commits. A runner whose input is
drained commits at once, so this bounds output latency only under a backlog; each commit costs
a transaction and one changelog record per changed key, so committing ten times a second (Kafka
Streams' 100 ms) rewrote a third of a Zipf-keyed input's keys each time (CountWords: 5% more CPU
per record). Quix Streams commits every 5 s, Faust every 2.8 s. The dirty documents a second
holds (one per record when every record is a new key) stay cached until the commit, beside the
clean ones the cache evicts (framework.core.keyed_state)."""


class Runner:
    """Runs one computation of a pipeline until `stop` is set."""

    def __init__(
        self,
        pipeline: Pipeline,
        computation: str,
        *,
        bootstrap: str,
        state_dir: Path,
        kafka: dict | None = None,
        instance_id: str | None = None,
        standby: int = 0,
        commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS,
        max_batch: int = 1000,
        idle_poll_s: float = 0.02,
    ) -> None:
        self.pipeline = pipeline
        self.spec = pipeline[computation]
        self.bootstrap = bootstrap
        self.kafka = dict(kafka or {})
        self.dir = Path(state_dir) / pipeline.name / computation
        self.commit_interval = commit_interval_ms / 1000
        self.max_batch = max_batch
        self.idle_poll_s = idle_poll_s
        self.instance_id = instance_id
        self.standby = standby

    def run(self, stop: threading.Event) -> None:
        self.pipeline.validate()
        try:
            self.spec.factory()
        except Exception as error:
            raise PipelineError(
                f"computation {self.spec.name!r} cannot be created ({type(error).__name__}: "
                f"{error}): fix its constructor or the factory passed to pipeline.computation"
            ) from error
        lock = self._lock_state_dir()
        try:
            partitions = self._retrying(stop, "starting", self._start)
            instance = self._instance_id()
            while not stop.is_set():
                member = self._retrying(stop, "joining", lambda: Member(self, partitions, instance))
                if member is None:
                    return
                try:
                    member.run(stop)
                except (Rejoin, KafkaException) as why:
                    if isinstance(why, KafkaException) and not unreachable(why):
                        member.close(clean=False)
                        raise
                    log.warning("%s: rejoining the group: %s", self.spec.group, why)
                    member.close(clean=False)
                    time.sleep(0.5)
                except BaseException:
                    member.close(clean=False)
                    raise
                else:
                    member.close(clean=True)
        finally:
            lock.close()

    def _start(self) -> dict[str, int]:
        create_topics(self.bootstrap, self.pipeline, client_config=self.kafka)
        return self._partition_counts()

    def _retrying(self, stop: threading.Event, what: str, step):
        """`step()`, again every second while the cluster cannot be reached (a broker down or
        restarting must not end the process); None if `stop` is set meanwhile."""
        while not stop.is_set():
            try:
                return step()
            except (KafkaException, TimeoutError) as error:
                if not unreachable(error):
                    raise
                why = f"{type(error).__name__}: {error}"  # not the error: it holds the clients
            log.warning("%s: %s: cannot reach Kafka (%s); retrying", self.spec.group, what, why)
            # The failed attempt's clients sit in its traceback's cycle: destroy them now, or
            # its transactional producer goes on initializing and later fences the next one.
            gc.collect()
            stop.wait(1.0)
        return None

    def _lock_state_dir(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        lock = open(self.dir / "lock", "a+")  # noqa: SIM115 - held for the process's life
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PipelineError(
                f"state dir {self.dir} is in use by another `logwheel run`: "
                "give each instance its own --state-dir"
            ) from None
        return lock

    def _instance_id(self) -> str:
        """`instance_id` if given (an orchestrator's stable pod name), else one kept in the
        state dir: stable across restarts, so a restarted process keeps its partitions (static
        membership) and its transactional id aborts what its killed predecessor left open."""
        if self.instance_id:
            return self.instance_id
        path = self.dir / "instance-id"
        if not path.exists():
            path.write_text(uuid.uuid4().hex[:12])
        return path.read_text().strip()

    def _partition_counts(self) -> dict[str, int]:
        admin = AdminClient(client_config(self.bootstrap, self.kafka))
        topics = admin.list_topics(timeout=30).topics
        counts = {name: len(meta.partitions) for name, meta in topics.items()}
        spec = self.spec
        for name, topic in spec.tables.items():
            if counts.get(topic) != spec.partitions:
                raise PipelineError(
                    f"{spec.group} joins table {name!r} ({topic}), which must have "
                    f"{spec.partitions} partitions like its key space but has "
                    f"{counts.get(topic, 'none (it does not exist)')}: co-partition them "
                    "(same partition count and keys) or create the topic"
                )
        for i in spec.inputs:
            if i.key is None and counts.get(i.stream) != spec.partitions:
                raise PipelineError(
                    f"{spec.group} reads {i.stream!r} by its Kafka key, so it needs "
                    f"{spec.partitions} partitions like its state but it has "
                    f"{counts.get(i.stream)}: give the input key_by(...) or recreate the topic"
                )
        return counts


class Member:
    """One membership of the consumer group: its clients, task manager, committer and loop."""

    def __init__(self, runner: Runner, partitions: dict[str, int], instance: str) -> None:
        spec, bootstrap, extra = runner.spec, runner.bootstrap, runner.kafka
        self.runner, self.spec = runner, spec
        instance = f"{spec.group}.{instance}"
        admin = AdminClient(client_config(bootstrap, extra))
        txn_id = instance if spec.exactly_once else None
        # Every commit flushes (which sends at once whatever lingers), so a runner's outputs are
        # never later for lingering 5 ms rather than 1: fewer, larger batches under a backlog.
        config = producer_config(
            bootstrap, transactional_id=txn_id, extra={"linger.ms": 5, **extra}
        )
        limits = read_limits(
            admin,
            [*spec.outputs, spec.changelog, spec.dlq, *spec.keyed_topics],
            int(config.get("message.max.bytes", DEFAULT_MAX_BYTES)),
        )
        self.collector = Collector(config, limits)
        self.consumer = Consumer(
            consumer_config(bootstrap, group=spec.group, instance=instance, extra=extra)
        )
        self.committer = Committer(spec, self.collector, self.consumer, instance)
        reader = reader_group(spec.group)
        self.channels = WatermarkChannels(consumer_config(bootstrap, reader=reader, extra=extra))
        self.restorer = Restorer(
            Consumer(consumer_config(bootstrap, reader=reader, extra=extra)),
            spec,
            _topic_ids(admin, spec),
        )
        rt = Runtime(
            runner.pipeline,
            spec,
            self.collector,
            partitions,
            ErrorPolicy(spec.group, spec.on_error),
        )
        self.tables = (
            Tables(
                Consumer(consumer_config(bootstrap, reader=reader, extra=extra)), spec, runner.dir
            )
            if spec.tables
            else None
        )
        self.tasks = TaskManager(
            rt,
            self.consumer,
            self.channels,
            self.restorer,
            runner.dir,
            self.tables,
            runner.standby,
        )
        self.dirty = False
        self.lost = False
        self.rewind = False  # an aborted commit: re-run from the last committed state
        self.admin, self.rt = admin, rt
        self.refusals = 0  # consecutive commits the broker refused for a record's content
        self.isolating = False  # one input record per commit, to find the one refused
        self.handled: list[tuple[str, int, int]] = []  # input records since the last commit
        self.meter = Meter(spec.name, self.consumer, self.collector)
        self.channels.follow(self._channels())
        self.consumer.subscribe(
            spec.consumed_topics,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _channels(self) -> list[str]:
        """Every watermark channel this computation's tasks learn from, and its own."""
        pipeline, spec = self.runner.pipeline, self.spec
        channels = [spec.watermarks]
        for i in spec.inputs:
            channels += partition_watermark(pipeline, i.stream, i.stream, 0)[1]
        return channels

    # -- membership (rebalance callbacks: register, never restore) --------------------------

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        if tps:
            REBALANCES.labels(self.spec.name, "assigned").inc()
            self.tasks.assigned(tps)

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        if not self.lost:
            self.commit()
        if tps:
            REBALANCES.labels(self.spec.name, "revoked").inc()
        self.tasks.revoked(tps)

    def _on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self.lost = True
        REBALANCES.labels(self.spec.name, "lost").inc()
        self.tasks.revoked(tps)

    # -- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        interval = self.runner.commit_interval
        consumer, channels, tasks = self.consumer, self.channels, self.tasks
        routes, poisoned = tasks.routes, self.collector.poisoned
        while not stop.is_set():
            if self.lost:
                raise Rejoin("partitions were lost (session timed out?)")
            max_batch = 1 if self.isolating else self.runner.max_batch
            if self.dirty or tasks.restoring:
                msgs = consumer.consume(max_batch, 0)
            else:  # consume() would sit out its whole timeout; poll() returns at the first
                first = consumer.poll(self._idle_timeout())
                msgs = [] if first is None else [first, *consumer.consume(max_batch - 1, 0)]
            channels.poll()
            if self.rewind:  # a commit was aborted, perhaps in a callback inside consume
                self.rewind = False
                tasks.rewind()
                continue
            if self.tables is not None:
                self._sync_tables(msgs)
            if poisoned or self.isolating:
                self._handle_one_by_one(msgs)
            else:
                _handle_runs(msgs, routes)
            tasks.step()
            if msgs:
                self.dirty = True
            elif routes:
                tasks.catch_up_positions()
            for task in tasks.running():
                if task.tick():
                    self.dirty = True
            if not self.dirty:
                self.dirty = self.committer.marks_moved(tasks.running())
            self.collector.poll()
            if time.monotonic() - self.meter.reported >= 1:
                self.meter.report(tasks.running(), tasks.inputs())
            if self.dirty and (
                len(msgs) < max_batch
                or self.isolating
                or time.monotonic() - self.committer.last_commit >= interval
            ):
                self.commit()

    def _handle_one_by_one(self, msgs: list[Message]) -> None:
        """While a record the broker refuses is being isolated: each record's position is
        kept, and an isolated one is dead-lettered instead of run."""
        routes, poisoned = self.tasks.routes, self.collector.poisoned
        for msg in msgs:
            err = msg.error()
            if err is not None:
                _check(err)
                continue
            route = routes.get((msg.topic(), msg.partition()))
            if route is None:
                continue
            position = (msg.topic(), msg.partition(), msg.offset())
            self.handled.append(position)
            if position in poisoned:
                self.rt.dead_letter(msg, BadRecord("produce", poisoned[position]), "produce")
                route[1].consumed(msg)
            else:
                route[0].handle(msg, route[1])

    def _sync_tables(self, msgs: list) -> None:
        """Tables first: read them at least to where they end now, for the tasks about to
        process records (a record never meets a table older than when it was read)."""
        keyed, routes = set(self.spec.keyed_topics), self.tasks.routes
        self.tables.sync(
            {
                m.partition()
                for m in msgs
                if m.topic() in keyed and (m.topic(), m.partition()) in routes
            }
        )
        self.tables.step()

    def _idle_timeout(self) -> float:
        timeout = self.runner.idle_poll_s
        now = time.time()
        for task in self.tasks.running():
            nxt = getattr(task, "executor", None) and task.executor.next_processing_timer()
            if nxt is not None:
                timeout = min(timeout, max(0.0, nxt / 1000 - now))
        return timeout

    def commit(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        committed = self.committer.commit(self.tasks.running(), self.tasks.inputs())
        handled, self.handled = self.handled, []
        if committed:
            self.refusals = 0
            self.isolating = self.isolating and bool(handled)
            return
        self.rewind = True
        if self.committer.refusal is not None:
            self._refused(handled)

    def _refused(self, handled: list[tuple[str, int, int]]) -> None:
        """The broker refused a record for its content. First the topics' limits are read
        again (they may have changed since the start): the checks before producing then
        catch the offending hook call. If it happens again, records are re-run one per
        commit until the one whose commit is refused is found; it is dead-lettered."""
        reason = f"the broker refused its output: {self.committer.refusal.str()}"
        self.refusals += 1
        if self.isolating and len(handled) == 1:
            self.collector.poisoned[handled[0]] = reason
            log.warning("%s: isolated the record at %s: %s", self.spec.group, handled[0], reason)
        elif self.refusals == 1:
            self.collector.limits = read_limits(
                self.admin, self.collector.limits.limits, self.collector.limits.producer_max_bytes
            )
        else:
            self.isolating = True
            log.warning("%s: %s; re-running one record per commit", self.spec.group, reason)

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
        except (KafkaException, RuntimeError, Rejoin) as error:
            log.warning("%s: closing the consumer: %s", self.spec.group, error)
        self.tasks.close()
        self.channels.close()
        self.restorer.consumer.close()
        if clean:
            self.collector.producer.flush(10)


def _topic_ids(admin: AdminClient, spec: ComputationSpec) -> dict[str, str]:
    """Ids of the journal topics, so a store can tell a topic created again from its own."""
    topics = [spec.changelog, spec.timers]
    described = admin.describe_topics(TopicCollection(topics))
    return {name: str(future.result(30).topic_id) for name, future in described.items()}


def _handle_runs(
    msgs: list[Message], routes: dict[tuple[str, int], tuple[Task, InputPartition]]
) -> None:
    """Hand each run of consecutive records of one partition (what a fetch returns) to its
    task at once: the routing is paid per run, not per record."""
    start, n = 0, len(msgs)
    while start < n:
        first = msgs[start]
        err = first.error()
        if err is not None:
            _check(err)
            start += 1
            continue
        topic, partition = first.topic(), first.partition()
        end = start + 1
        while end < n:
            msg = msgs[end]
            if msg.partition() != partition or msg.topic() != topic or msg.error() is not None:
                break
            end += 1
        route = routes.get((topic, partition))
        if route is not None:
            route[0].handle_run(msgs[start:end] if start or end < n else msgs, route[1])
        start = end


def _check(err: KafkaError) -> None:
    # librdkafka reports a fatal error (e.g. this static member fenced by another with its
    # instance id) as an event of code _FATAL whose own fatal() is False: the client is dead
    if err.fatal() or err.code() == KafkaError._FATAL:
        raise Rejoin(f"fatal consumer error: {err}")
    if err.code() != KafkaError._PARTITION_EOF:
        log.warning("consumer: %s", err)


def default_state_dir() -> Path:
    return Path(os.environ.get("LOGWHEEL_STATE_DIR", ".logwheel/state"))
