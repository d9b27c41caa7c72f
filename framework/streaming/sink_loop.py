"""One membership of a sink's consumer group and its loop: poll, decode, batch each
partition's records, and hand each batch to the sink with the partition's next offset (the
protocol: framework/sinks/protocol.py).

The target keeps the offsets (CONTRACT.md, "Exactly-once into a database"): a partition
assigned here is paused until the sink's `open` says where it stands — which also fences its
previous owner — and read from there. The group's own offsets are committed after each batch
only so that `logwheel status` shows the sink's lag; nothing is ever resumed from them while
the target has offsets.

A batch goes: its dead letters (records that cannot be decoded) sent and flushed; the
`before-transaction` stop point; `write`; the `after-commit` stop point; the group's offset
(framework/sinks/stops.py names the points). A row the target refuses is dead-lettered and
the batch written again without it; a target that does not answer holds the partition — paused,
its batch kept, retried with backoff (framework/streaming/holds.py's) — and skips nothing; a
fenced write ends the membership (`Rejoin`). Rebalance callbacks only register what changed:
a revoked partition's unwritten batch is dropped, to be read again by its next owner from the
target's offset.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from framework.core.api import Record
from framework.core.dead_letters import ErrorPolicy
from framework.core.logs import RateLimited
from framework.core.metrics import COMMITS, CONSUMER_LAG, HELD_PARTITIONS, REBALANCES, RECORDS_IN
from framework.core.pipeline import Pipeline
from framework.core.sink_spec import SinkSpec
from framework.errors import BadRecord, ConfigurationError, Fatal, Rejoin, Retry
from framework.kafka.errors import reaching_kafka
from framework.kafka.groups import commit_metadata
from framework.kafka.limits import TopicLimits
from framework.kafka.output import dead_letter_record
from framework.kafka.record_decoding import decode_record
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import stream_decoder
from framework.sinks.protocol import DEFAULT_BATCH, Fenced, Refused, Sink
from framework.sinks.stops import stop_at
from framework.streaming.fetched_runs import partition_runs
from framework.streaming.holds import backoff
from framework.streaming.membership import Pace

log = logging.getLogger(__name__)

FLUSH_S = 30.0
"""How long the dead letters of a batch may take to be acknowledged before the membership
ends (`Retry`): they must be on the broker before the batch that leaves them out commits."""


class RowRefused(BadRecord):
    """A row the sink's target refused; the message is the target's."""


@dataclass
class SinkPartition:
    """One input partition this member holds: where the target says it stands, the batch
    being gathered, and its hold while the target does not answer."""

    topic: str
    partition: int
    opened: bool = False
    position: int = -1  # the next offset to read (-1: wherever the consumer starts)
    batch: list[tuple[Message, Record]] = field(default_factory=list)
    letters: list[tuple[Message, BadRecord]] = field(default_factory=list)
    next_offset: int = -1  # after the last record gathered
    retries: int = 0
    until: float = 0.0  # held (paused) until then, monotonic seconds; 0: not held

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def pending(self) -> bool:
        return self.next_offset >= 0


class SinkMembership:
    """One membership of a sink's consumer group: its loop and its rebalance callbacks."""

    def __init__(
        self,
        pipeline: Pipeline,
        spec: SinkSpec,
        *,
        consumer: Consumer,
        producer: Producer,
        limits: TopicLimits,
        instance: str,
        registry: RegistrySettings | None = None,
        pace: Pace = Pace(),  # noqa: B008 - frozen
    ) -> None:
        self.spec = spec
        self.sink: Sink = spec.sink
        self.batch = int(getattr(spec.sink, "batch", DEFAULT_BATCH) or DEFAULT_BATCH)
        self._consumer, self._producer, self._limits = consumer, producer, limits
        self._instance = instance
        self._pace = pace
        self._decoders: dict[str, Callable] = {
            s: stream_decoder(pipeline, s, registry) for s in spec.consumed_topics
        }
        self._policy = ErrorPolicy(spec.group, "dead_letter")
        self._parts: dict[tuple[str, int], SinkPartition] = {}
        self._lost = False
        self._callbacks = threading.RLock()
        self._failure: BaseException | None = None
        self._warn = RateLimited(log)
        self._last_flush = time.monotonic()
        self._reported = 0.0
        HELD_PARTITIONS.labels(spec.name).set(0)
        COMMITS.labels(spec.name)
        consumer.subscribe(
            spec.consumed_topics,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def run(self, stop: threading.Event) -> None:
        """The loop until `stop`, then a last write of what is gathered and a clean leave;
        any other end leaves at once and raises (`Rejoin`, `Retry`: join again)."""
        try:
            with reaching_kafka():
                self._loop(stop)
                for part in list(self._parts.values()):
                    if part.opened and not part.until:
                        self._flush(part)
        except BaseException:
            self._leave()
            raise
        self._leave()

    # -- the loop ----------------------------------------------------------------------------

    def _loop(self, stop: threading.Event) -> None:
        consumer, interval = self._consumer, self._pace.commit_interval_s
        idle = self._pace.idle_poll_s
        while not stop.is_set():
            self._open_waiting()
            self._retry_held()
            msgs = consumer.consume(self.batch, idle)
            self._raise_failure()
            if self._lost:
                raise Rejoin("partitions were lost (session timed out?)")
            self._take_all(msgs)
            drained = len(msgs) < self.batch
            if drained or time.monotonic() - self._last_flush >= interval:
                for part in list(self._parts.values()):
                    if part.pending and part.opened and not part.until:
                        self._flush(part)
                self._last_flush = time.monotonic()
            self._producer.poll(0)
            if time.monotonic() - self._reported >= 1:
                self._report()

    def _take_all(self, msgs: list[Message]) -> None:
        """Hand each run of one partition's messages to `_take`."""
        for topic, partition, run in partition_runs(msgs):
            part = self._parts.get((topic, partition))
            if part is not None and part.opened and not part.until:
                self._take(part, run)

    def _take(self, part: SinkPartition, msgs: list[Message]) -> None:
        """Add a run of one partition's messages to its batch (or its dead letters); a full
        batch is written at once. Messages before the partition's position (fetched before a
        seek) are passed over."""
        topic, decode, batch = part.topic, self._decoders[part.topic], part.batch
        prefix, full = f"{topic}/{part.partition}/", self.batch
        for msg in msgs:
            offset = msg.offset()
            if offset < part.position:
                continue
            try:
                record = decode_record(
                    decode, topic, msg.key(), msg.value(), msg.timestamp()[1], msg.headers(),
                    prefix, offset,
                )  # fmt: skip
            except BadRecord as bad:
                part.letters.append((msg, bad))
            except Retry as error:  # the Schema Registry away: not the record's fault
                self._hold(part, error, offset)
                return
            else:
                batch.append((msg, record))
            part.next_offset = part.position = offset + 1
            if len(batch) >= full:
                self._flush(part)
                if part.until:  # held: the rest is read again after the resume
                    return
                batch = part.batch

    def _flush(self, part: SinkPartition) -> None:
        """Write the partition's batch with its next offset (the module's docstring says in
        which steps); held if the target does not answer."""
        if not part.pending:
            return
        self._send_letters(part.letters, "decode")
        part.letters = []
        stop_at("before-transaction")
        while True:
            try:
                self.sink.write(
                    part.topic, part.partition, [r for _, r in part.batch], part.next_offset
                )
            except Refused as refused:
                self._refused(part, refused)
                continue
            except Fenced as fenced:
                raise Rejoin(f"{self.spec.group}: fenced: {fenced}") from None
            except Exception as error:  # noqa: BLE001 - a sink's any other failure: hold
                self._hold(part, error, part.next_offset)
                return
            break
        stop_at("after-commit")
        n, next_offset = len(part.batch), part.next_offset
        for msg, _ in part.batch[:1]:
            RECORDS_IN.labels(self.spec.name, msg.topic()).inc(n)
        part.batch, part.next_offset, part.retries = [], -1, 0
        COMMITS.labels(self.spec.name).inc()
        metadata = commit_metadata(self._instance)
        try:  # for `logwheel status` alone: the target's offset is the truth
            self._consumer.commit(
                offsets=[
                    TopicPartition(part.topic, part.partition, next_offset, metadata=metadata)
                ],
                asynchronous=True,
            )
        except KafkaException as error:
            self._warn.log("commit", "%s: group offset not committed: %s", self.spec.group, error)

    def _refused(self, part: SinkPartition, refused: Refused) -> None:
        """Dead-letter the rows the target refused (acknowledged before the batch that leaves
        them out is written again) and take them out of the batch."""
        gone = {i for i, _ in refused.rows}
        if not gone or not gone <= set(range(len(part.batch))):
            raise Fatal(f"{self.spec.group}: the sink refused rows it was not given: {refused}")
        letters = [(part.batch[i][0], RowRefused("write", why)) for i, why in refused.rows]
        self._send_letters(letters, "write")
        part.batch = [entry for i, entry in enumerate(part.batch) if i not in gone]

    def _send_letters(self, letters: list[tuple[Message, BadRecord]], stage: str) -> None:
        if not letters:
            return
        for msg, bad in letters:
            if self._policy.admit(stage, bad):
                topic, key, value, _, ts, headers = dead_letter_record(
                    self.spec.dlq, self._limits, bad, stage, msg, None
                )
                self._produce(topic, key, value, ts, headers)
        if self._producer.flush(FLUSH_S) > 0:
            raise Retry(f"{self.spec.group}: dead letters not acknowledged in {FLUSH_S:g} s")

    def _produce(self, topic, key, value, ts, headers) -> None:
        while True:
            try:
                self._producer.produce(topic, value, key, timestamp=ts, headers=headers)
                return
            except BufferError:
                self._producer.poll(0.1)

    # -- opening and holding -----------------------------------------------------------------

    def _open_waiting(self) -> None:
        """Ask the sink where each newly assigned partition stands, read it from there."""
        now, opened = time.monotonic(), []
        for part in list(self._parts.values()):
            if part.opened or part.until > now:
                continue
            try:
                start = self.sink.open(part.topic, part.partition)
            except ConfigurationError:
                raise
            except Exception as error:  # noqa: BLE001 - the target away: try again later
                self._hold(part, error, None)
                continue
            part.opened, part.until, part.retries = True, 0.0, 0
            if start is not None:
                part.position = start
                try:
                    self._consumer.seek(TopicPartition(part.topic, part.partition, start))
                except KafkaException as error:
                    raise Rejoin(f"seeking {part.topic}[{part.partition}]: {error}") from None
            self._consumer.resume([part.tp])
            where = "the group's offset" if start is None else start
            opened.append(f"{part.topic}[{part.partition}] at {where}")
        if opened:
            log.info("%s: assigned %s", self.spec.group, ", ".join(opened))

    def _hold(self, part: SinkPartition, error: BaseException, resume_at: int | None) -> None:
        """Pause the partition, its batch kept, and retry after a backoff; reading goes on at
        `resume_at` after the resume (None: where `open` will say)."""
        wait = backoff(part.retries)
        part.retries += 1
        part.until = time.monotonic() + wait
        self._warn.log(
            f"hold|{part.topic}|{part.partition}",
            "%s: holding %s[%d] (retry in %.1f s): %s",
            self.spec.group, part.topic, part.partition, wait, error,
        )  # fmt: skip
        self._consumer.pause([part.tp])
        if resume_at is not None and resume_at >= 0:
            part.position = resume_at
            try:
                self._consumer.seek(TopicPartition(part.topic, part.partition, resume_at))
            except KafkaException as err:
                raise Rejoin(f"seeking {part.topic}[{part.partition}]: {err}") from None
        HELD_PARTITIONS.labels(self.spec.name).set(sum(1 for p in self._parts.values() if p.until))

    def _retry_held(self) -> None:
        now = time.monotonic()
        for part in list(self._parts.values()):
            if part.opened and part.until and part.until <= now:
                part.until = 0.0
                self._consumer.resume([part.tp])
                if part.pending:
                    self._flush(part)
                HELD_PARTITIONS.labels(self.spec.name).set(
                    sum(1 for p in self._parts.values() if p.until)
                )

    def _report(self) -> None:
        self._reported = time.monotonic()
        for part in self._parts.values():
            _, high = self._consumer.get_watermark_offsets(part.tp, cached=True)
            if high is not None and high >= 0 and part.position >= 0:
                CONSUMER_LAG.labels(self.spec.name, part.topic, str(part.partition)).set(
                    max(0, high - part.position)
                )

    # -- rebalance callbacks: register, never call the sink ------------------------------------

    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept():
            consumer.assign(tps)
            consumer.pause(tps)
            for tp in tps:
                self._parts[(tp.topic, tp.partition)] = SinkPartition(tp.topic, tp.partition)
            if tps:
                REBALANCES.labels(self.spec.name, "assigned").inc()

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept():
            self._drop(tps, "revoked")

    def _on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        with self._kept():
            self._lost = True
            self._drop(tps, "lost")

    def _drop(self, tps: list[TopicPartition], why: str) -> None:
        for tp in tps:
            self._parts.pop((tp.topic, tp.partition), None)
        if tps:
            REBALANCES.labels(self.spec.name, why).inc()
            log.info("%s: gave up %d partition(s)", self.spec.group, len(tps))

    def _kept(self):
        return _Kept(self)

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _leave(self) -> None:
        self._lost = True
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as error:
            log.warning("%s: closing the consumer: %s", self.spec.group, error)
        try:
            self.sink.close()
        except Exception as error:  # noqa: BLE001 - a user's sink: log it and go on
            log.warning("%s: closing the sink: %s", self.spec.group, error)
        self._producer.flush(10)


class _Kept:
    """Around a rebalance callback: an exception is kept for the loop to raise (it must not
    leave through the client: confluent-kafka-python#729)."""

    def __init__(self, membership: SinkMembership) -> None:
        self.m = membership

    def __enter__(self) -> None:
        self.m._callbacks.acquire()

    def __exit__(self, kind, error, tb) -> bool:
        self.m._callbacks.release()
        if error is not None:
            self.m._failure = self.m._failure or error
        return True
