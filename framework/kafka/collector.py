"""Everything a process writes goes through one producer; the collector records where it landed
and what the broker refused (Kafka Streams' RecordCollectorImpl).

The offsets are what watermark marks carry (invariant 4) and what local checkpoints record. A
refusal fails the commit it belongs to. When the broker refuses a record for its content (too
large, a timestamp outside its window, ...), the loop re-runs from the last commit and
isolates the input record whose hook call made it (`poisoned`), so that one is dead-lettered
instead of failing every commit forever (invariant 7). Refusals that are not the data's fault
(broker down, fencing) are raised as they are: retry or rejoin, never dead-letter good data.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from framework.errors import Retry
from framework.kafka.limits import TopicLimits
from framework.kafka.topic_ends import Partition, end_offsets

ID_HEADER = "logwheel.id"
RESERVED_PREFIX = "logwheel."
"""Headers only logwheel writes; on a record from outside, all but `logwheel.id` are dropped
(`kafka.record_decoding`), and a dead letter keeps none of them but the id (`kafka.output`)."""


Outgoing = tuple[str, bytes | None, bytes | None, int, int, list[tuple[str, bytes]] | None]
"""(topic, key, value, partition or -1, timestamp or 0, headers): one record to produce."""

DATA_FAULTS = frozenset(
    (
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_MSG,
        KafkaError.RECORD_LIST_TOO_LARGE,
    )
)
"""Broker refusals caused by a record's content: retrying cannot help."""
STUCK_MARGIN_S = 30.0
"""How long past its delivery timeout a flush still waiting counts as stuck."""
_DEFAULT_MESSAGE_TIMEOUT_MS = 300_000  # librdkafka's


def _delivery_timeout_s(config: dict) -> float:
    """By when every send has landed or failed: `message.timeout.ms`, which librdkafka lowers
    to `transaction.timeout.ms` for a transactional producer (0 is forever: then a day)."""
    ms = int(config.get("message.timeout.ms", _DEFAULT_MESSAGE_TIMEOUT_MS))
    if "transactional.id" in config:
        ms = min(ms or 2**62, int(config.get("transaction.timeout.ms", 60_000)))
    return (ms or 86_400_000) / 1000


_TRANSACTIONAL_SETTINGS = ("transactional.id", "transaction.timeout.ms", "enable.idempotence")
"""Left out of the admin client's settings: it must not take the producer's transactional id."""


class Collector:
    """A producer plus the last offset it wrote to each topic-partition."""

    def __init__(
        self, config: dict, limits: TopicLimits | None = None, stuck_after_s: float | None = None
    ) -> None:
        self.written: dict[tuple[str, int], int] = {}
        self.delivered: Counter[str] = Counter()  # records acknowledged per topic, for metrics
        self.limits = limits or TopicLimits()
        self.poisoned: dict[tuple[str, int, int], str] = {}  # input position -> refusal
        self._errors: list[KafkaError] = []
        self._unplaced: set[tuple[str, int]] = set()  # written, at an offset nobody reported
        self._config = config
        self.producer = Producer({**config, "on_delivery": self._delivered})
        self._stuck_after = stuck_after_s or _delivery_timeout_s(config) + STUCK_MARGIN_S

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._errors.append(err)
            return
        topic, offset = msg.topic(), msg.offset()
        key = (topic, msg.partition())
        if offset is None:
            # A retried send the broker had already written (DUPLICATE_SEQUENCE_NUMBER):
            # librdkafka reports it delivered, without its offset.
            self._unplaced.add(key)
        elif offset > self.written.get(key, -1):  # not below what `remember` took over
            self.written[key] = offset
        self.delivered[topic] += 1

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        timestamp: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
    ) -> None:
        # -1 and 0 are confluent-kafka's own defaults: the partitioner picks, the time is now
        partition = -1 if partition is None else partition
        self.send_all(((topic, key, value, partition, timestamp or 0, headers),))

    def send_all(self, records: Iterable[Outgoing]) -> None:
        """Produce each (topic, key, value, partition, timestamp, headers); the per-record
        path, so confluent-kafka's arguments go by position (keywords cost a third more)."""
        produce = self.producer.produce
        for topic, key, value, partition, timestamp, headers in records:
            while True:
                try:
                    produce(topic, value, key, partition, None, None, timestamp, headers)
                    break
                except BufferError:
                    self.poll(0.05)
                except KafkaException as error:  # refused before sending: fails the commit
                    self._errors.append(error.args[0])
                    break

    def poll(self, timeout: float = 0) -> None:
        """Serve delivery reports (refusals are kept for the next `flush`)."""
        self._serve(self.producer.poll, timeout)

    def flush(self) -> None:
        """Wait for every send; raise the first refusal. `Retry` if sends are still waiting
        long after each should have landed or timed out (`message.timeout.ms`): a fenced or
        abandoned transactional producer's flush was seen to wait for good, and the loop
        that called it stopped polling, its membership neither ending nor going on."""
        deadline = time.monotonic() + self._stuck_after
        while (left := self._serve(self.producer.flush, 1.0)) and not self._errors:
            if time.monotonic() > deadline:
                raise Retry(f"{left} records not delivered in {self._stuck_after:.0f} s")
        if self._errors:
            err, self._errors = self._errors[0], []
            raise KafkaException(err)
        if self._unplaced:
            self._place()

    def _place(self) -> None:
        """Records delivered at an unknown offset lie below their partition's end now: count
        that end as written, so a mark never claims less than was written (invariant 4)."""
        admin = self._admin()
        wanted = {TopicPartition(t, p): OffsetSpec.latest() for t, p in self._unplaced}
        try:
            ends = admin.list_offsets(wanted, request_timeout=30)
            for tp, future in ends.items():
                key = (tp.topic, tp.partition)
                end = future.result(30 + STUCK_MARGIN_S).offset  # a TimeoutError: Unreachable
                self.written[key] = max(self.written.get(key, -1), end - 1)
                self._unplaced.discard(key)
        except KafkaException as error:
            raise Retry(f"finding where records were written: {error}") from None

    def _serve(self, call: Callable[..., int | None], *args: float) -> int | None:
        """A producer call that runs delivery callbacks. confluent-kafka raises a fatal delivery
        error (a fenced transactional producer) out of it, and a SystemError caused by it when
        another callback runs with it pending; either is kept like any refusal, so the commit
        that flushes ends the membership instead of the process (found by the full-size seeded
        chaos run). It goes first: the producer cannot go on, whatever else was refused."""
        try:
            return call(*args)
        except SystemError as error:
            if not isinstance(error.__cause__, KafkaException):
                raise
            self._errors.insert(0, error.__cause__.args[0])
        except KafkaException as error:
            self._errors.insert(0, error.args[0])
        except KafkaError as error:  # raised bare, too
            self._errors.insert(0, error)
        return None

    def _admin(self) -> AdminClient:
        return AdminClient(
            {k: v for k, v in self._config.items() if k not in _TRANSACTIONAL_SETTINGS}
        )

    def refusal(self) -> KafkaError | None:
        """The first refusal of a record's content among those not yet raised."""
        return next((e for e in self._errors if e.code() in DATA_FAULTS), None)

    def discard_errors(self) -> None:
        """The transaction was aborted: refusals of what it held (purged sends) are moot."""
        self._errors = []

    def remember(self, offsets: Iterable[tuple[tuple[str, int], int]]) -> None:
        """Take over offsets a previous owner wrote, so marks never claim less than it did."""
        for key, offset in offsets:
            if offset > self.written.get(key, -1):
                self.written[key] = offset

    def claim_ends(
        self, partitions: Iterable[Partition], admin: AdminClient | None = None, timeout: float = 30
    ) -> None:
        """Count everything already in `partitions` as written by this process, open
        transactions' records included, so a mark of a writer taking over (a task's new owner,
        an injector's new incarnation) cannot overtake what earlier writers wrote after their
        last mark, or whose marks a reader never sees: it only gets a channel's latest."""
        ends = end_offsets(
            self._admin() if admin is None else admin, partitions, committed=False, timeout=timeout
        )
        self.remember((tp, end - 1) for tp, end in ends.items() if end > 0)
