"""One `logwheel run` process for one computation: group membership, restore, the loop and
the commit (Kafka Streams' StreamThread, MillWheel's per-key checkpoint of §6.1.1).

Every commit is one Kafka transaction holding the hooks' productions, the changelog and timer
journal records of dirty keys, the tasks' watermark marks and the input offsets (invariant 1);
RocksDB follows only after it commits. The producer is fenced through the consumer group's
metadata (KIP-447), so a member that lost its partitions cannot commit (invariant 3).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from framework.collector import Collector
from framework.kafka import client_config, consumer_config, producer_config
from framework.pipeline import Pipeline, PipelineError
from framework.restore import restore
from framework.serde import decoder_for
from framework.state import TaskStore
from framework.task import InputPartition, KeyedTask, RepartitionTask, Runtime, Task, decode_timer
from framework.topics import create_topics
from framework.watermarks import Published, WatermarkChannels, encode_mark, partition_watermark

log = logging.getLogger(__name__)


class Restart(Exception):
    """The current group generation cannot go on (partitions lost, transaction failed)."""


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
        commit_interval_ms: int = 100,
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
            create_topics(self.bootstrap, self.pipeline, client_config=self.kafka)
            partitions = self._partition_counts()
            instance = self._instance_id()
            while not stop.is_set():
                generation = Generation(self, partitions, instance)
                try:
                    generation.run(stop)
                except Restart as why:
                    log.warning("%s: rejoining the group: %s", self.spec.group, why)
                    generation.close(clean=False)
                    time.sleep(0.5)
                else:
                    generation.close(clean=True)
        finally:
            lock.close()

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
        """Stable across restarts on the same state dir, so a restarted process's
        transactional id aborts what its killed predecessor left open at once."""
        path = self.dir / "instance-id"
        if not path.exists():
            path.write_text(uuid.uuid4().hex[:12])
        return path.read_text().strip()

    def _partition_counts(self) -> dict[str, int]:
        admin = AdminClient(client_config(self.bootstrap, self.kafka))
        topics = admin.list_topics(timeout=30).topics
        counts = {name: len(meta.partitions) for name, meta in topics.items()}
        spec = self.spec
        for i in spec.inputs:
            if i.key is None and counts.get(i.stream) != spec.partitions:
                raise PipelineError(
                    f"{spec.group} reads {i.stream!r} by its Kafka key, so it needs "
                    f"{spec.partitions} partitions like its state but it has "
                    f"{counts.get(i.stream)}: give the input key_by(...) or recreate the topic"
                )
        return counts


class Generation:
    """One membership of the consumer group: its clients, tasks and open transaction."""

    def __init__(self, runner: Runner, partitions: dict[str, int], instance: str) -> None:
        self.runner = runner
        spec, bootstrap, extra = runner.spec, runner.bootstrap, runner.kafka
        self.spec = spec
        self.eos = spec.exactly_once
        instance = f"{spec.group}.{instance}"
        txn_id = instance if self.eos else None
        self.collector = Collector(producer_config(bootstrap, transactional_id=txn_id, extra=extra))
        self.producer = self.collector.producer
        if self.eos:
            self.producer.init_transactions(60)
            self.producer.begin_transaction()
        self.rt = Runtime(runner.pipeline, spec, self.collector, partitions)
        self.channels = WatermarkChannels(consumer_config(bootstrap, extra=extra))
        self.restorer = Consumer(consumer_config(bootstrap, extra=extra))
        # Range co-locates partition p of every keyed topic; with one, cooperative is better.
        assignor = "cooperative-sticky" if len(spec.keyed_topics) == 1 else "range"
        self.consumer = Consumer(
            consumer_config(
                bootstrap, group=spec.group, instance=instance, assignor=assignor, extra=extra
            )
        )
        self.repartitioned = {i.stream: i for i in spec.inputs if i.key is not None}
        self.channels.follow(self._channels())
        self.tasks: dict[tuple, Task] = {}
        self.routes: dict[tuple[str, int], tuple[Task, InputPartition]] = {}
        self.dirty = False
        self.lost = False
        self.rewind = False  # an aborted commit: re-run from the last committed state
        self.last_commit = time.monotonic()
        self.marks: dict[str, tuple[int, bool, int]] = {}  # what each task last published
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

    # -- membership ---------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        if not tps:
            return
        self.channels.catch_up()
        committed = {(c.topic, c.partition): c.offset for c in consumer.committed(tps, 60)}
        for tp in tps:
            task = self._task_for(tp)
            for inp in task.inputs:
                if (inp.topic, inp.partition) == (tp.topic, tp.partition):
                    self.routes[(tp.topic, tp.partition)] = (task, inp)
                    inp.position = self._start(consumer, tp, committed)
                    if isinstance(inp.watermark, Published):
                        self.channels.listen(inp.channels, inp.watermark)
        log.info("%s: assigned %s", self.spec.group, _names(tps))

    def _task_for(self, tp: TopicPartition) -> Task:
        input_ = self.repartitioned.get(tp.topic)
        ident = ("r", tp.topic, tp.partition) if input_ else ("k", tp.partition)
        task = self.tasks.get(ident)
        if task is None:
            if input_ is not None:
                task = RepartitionTask(self.rt, input_, tp.partition)
            else:
                store = TaskStore(
                    self.runner.dir / f"task-{tp.partition}",
                    decoder_for(self.spec.state_schema),
                    decode_timer,
                )
                restore(self.restorer, self.spec, tp.partition, store)
                task = KeyedTask(self.rt, tp.partition, store)
            task.resume(self.channels.latest(self.spec.watermarks, task.producer))
            self._claim_outputs(task)
            self.tasks[ident] = task
        return task

    def _claim_outputs(self, task: Task) -> None:
        """A task taking over counts everything already in its output partitions as written
        by it, so its first mark cannot overtake what its previous owner wrote after its
        last mark."""
        ends = []
        for topic in task.outputs:
            for p in range(self.rt.partitions.get(topic, 0)):
                _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), 30)
                if high > 0:
                    ends.append(((topic, p), high - 1))
        self.collector.remember(ends)

    @staticmethod
    def _start(consumer: Consumer, tp: TopicPartition, committed: dict) -> int:
        offset = committed.get((tp.topic, tp.partition), OFFSET_BEGINNING)
        if offset >= 0:
            return offset
        low, _ = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), 30)
        return low

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        if not self.lost:
            self.commit()
        self._drop(tps)

    def _on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self.lost = True
        self._drop(tps)

    def _drop(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            task, inp = self.routes.pop((tp.topic, tp.partition), (None, None))
            if isinstance(inp, InputPartition) and isinstance(inp.watermark, Published):
                self.channels.forget(inp.watermark)
            if task is not None and not any(t is task for t, _ in self.routes.values()):
                self.tasks = {k: t for k, t in self.tasks.items() if t is not task}
                task.close()
        if tps:
            log.info("%s: gave up %s", self.spec.group, _names(tps))

    # -- the loop -----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        max_batch, interval = self.runner.max_batch, self.runner.commit_interval
        consumer, channels, producer = self.consumer, self.channels, self.producer
        routes = self.routes
        while not stop.is_set():
            if self.lost:
                raise Restart("partitions were lost (session timed out?)")
            if self.dirty:
                msgs = consumer.consume(max_batch, 0)
            else:  # consume() would sit out its whole timeout; poll() returns at the first
                first = consumer.poll(self._idle_timeout())
                msgs = [] if first is None else [first, *consumer.consume(max_batch - 1, 0)]
            channels.poll()
            if self.rewind:  # a commit failed, perhaps in a rebalance callback inside consume
                self._rewind()
                continue
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    _check(err)
                    continue
                route = routes.get((msg.topic(), msg.partition()))
                if route is not None:
                    route[0].handle(msg, route[1])
            if msgs:
                self.dirty = True
            elif routes:
                self._catch_up_positions()
            for task in list(self.tasks.values()):
                if task.tick():
                    self.dirty = True
            if not self.dirty:
                self.dirty = self._marks_moved()
            producer.poll(0)
            if self.dirty and (
                len(msgs) < max_batch or time.monotonic() - self.last_commit >= interval
            ):
                self.commit()

    def _catch_up_positions(self) -> None:
        """Read positions move past transaction markers too, which no message reports: take
        them from the consumer when idle, or a mark naming a marker's offset (as a takeover's
        claim of its outputs' end offsets does) would never apply."""
        tps = [TopicPartition(topic, p) for topic, p in self.routes]
        for tp in self.consumer.position(tps):
            route = self.routes.get((tp.topic, tp.partition))
            if route is not None and tp.offset > route[1].position:
                route[1].position = tp.offset

    def _idle_timeout(self) -> float:
        timeout = self.runner.idle_poll_s
        now = time.time()
        for task in self.tasks.values():
            nxt = getattr(task, "executor", None) and task.executor.next_processing_timer()
            if nxt is not None:
                timeout = min(timeout, max(0.0, nxt / 1000 - now))
        return timeout

    def _marks_moved(self) -> bool:
        return any(self.marks.get(t.producer) != t.low_watermark() for t in self.tasks.values())

    def commit(self) -> None:
        """One transaction: journals, marks, offsets; then local state follows."""
        if not self.dirty:
            return
        spec, collector = self.spec, self.collector
        try:
            tasks = list(self.tasks.values())
            for task in tasks:
                task.prepare_commit()
            # A mark is due when what it promises moved. Its offsets cover every write so far
            # (takeovers start from the end offsets), so unchanged marks need not be re-sent.
            due = [t for t in tasks if self.marks.get(t.producer) != t.mark_state()]
            if due:
                collector.flush()  # the marks name the offsets these writes landed at
            for task in due:
                mark = task.mark()
                self.marks[task.producer] = (mark.watermark, mark.idle, mark.input_watermark)
                collector.send(
                    spec.watermarks, task.producer.encode(), encode_mark(mark), partition=0
                )
            offsets = [
                TopicPartition(inp.topic, inp.partition, inp.position)
                for _, inp in self.routes.values()
            ]
            if self.eos:
                if offsets:
                    self.producer.send_offsets_to_transaction(
                        offsets, self.consumer.consumer_group_metadata(), 60
                    )
                self.producer.commit_transaction(60)
            else:
                collector.flush()
                if offsets:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            self._abort(error)
            return
        for task in tasks:
            task.committed()
        if self.eos:
            self.producer.begin_transaction()
        self.dirty = False
        self.last_commit = time.monotonic()

    def _abort(self, error: KafkaException) -> None:
        """A commit failed. If the transaction can be aborted (a rebalance moved the group's
        generation under it, say), abort it and re-run from the last commit, as Kafka Streams
        does; anything else ends this membership."""
        err = error.args[0] if error.args else None
        if not (isinstance(err, KafkaError) and (err.txn_requires_abort() or not self.eos)):
            raise Restart(f"commit failed: {error}") from error
        log.warning("%s: commit failed, re-running from the last commit: %s", self.spec.group, err)
        if self.eos:
            try:
                self.producer.abort_transaction(60)
                self.producer.begin_transaction()
            except KafkaException as fatal:
                raise Restart(f"abort failed: {fatal}") from fatal
        self.dirty = False
        self.rewind = True

    def _rewind(self) -> None:
        """Rebuild every task from its committed state and read again from the committed
        offsets: what the aborted transaction did is gone from Kafka and never reached RocksDB."""
        tps = [TopicPartition(topic, p) for topic, p in self.routes]
        self._drop(tps)
        self.marks.clear()
        self._on_assign(self.consumer, tps)
        for (topic, p), (_, inp) in self.routes.items():
            self.consumer.seek(TopicPartition(topic, p, inp.position))
        self.rewind = False

    def close(self, clean: bool) -> None:
        """Leave the group; a clean close commits first, an unclean one aborts."""
        if not clean:
            self.lost = True  # no commit from the revocation the close triggers
            if self.eos:
                with contextlib.suppress(KafkaException):
                    self.producer.abort_transaction(10)
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError, Restart) as error:
            log.warning("%s: closing the consumer: %s", self.spec.group, error)
        for task in self.tasks.values():
            task.close()
        self.tasks.clear()
        self.channels.close()
        self.restorer.close()
        self.producer.flush(10)


def _check(err: KafkaError) -> None:
    if err.fatal():
        raise Restart(f"fatal consumer error: {err}")
    if err.code() != KafkaError._PARTITION_EOF:
        log.warning("consumer: %s", err)


def _names(tps: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in tps)


def default_state_dir() -> Path:
    return Path(os.environ.get("LOGWHEEL_STATE_DIR", ".logwheel/state"))
