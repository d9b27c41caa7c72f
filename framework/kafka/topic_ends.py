"""Reading topics: where a point in a partition lies, where a partition ends, and reading
partitions to their end (a compacted topic's latest value per key among them) — the one way
every reader of a journal, table, channel or plan knows it has read everything there is."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from framework.core.pipeline import PipelineError
from framework.errors import Rejoin
from framework.kafka.config import consumer_config
from framework.kafka.errors import Unreachable, check, reaching_kafka

POINTS = ("earliest", "latest")
T = TypeVar("T")


def parse_point(to: str) -> str | int:
    """`earliest`, `latest`, or an ISO date-time as milliseconds since the epoch."""
    if to in POINTS:
        return to
    try:
        moment = datetime.fromisoformat(to)
    except ValueError:
        raise PipelineError(
            f"--to {to!r}: use earliest, latest or an ISO date-time like 2026-11-21T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        raise PipelineError(f"--to {to!r}: give a time zone, e.g. {to}Z or {to}+01:00")
    return int(moment.timestamp() * 1000)


def offset_at(consumer: Consumer, tp: TopicPartition, where: str | int, low: int, high: int) -> int:
    """The offset of `where` (earliest, latest or a time in ms) in `tp`, whose offsets run
    from `low` to `high`: the first record at or after the time, else the end."""
    if where == "earliest":
        return low
    if where == "latest":
        return high
    found = consumer.offsets_for_times([TopicPartition(tp.topic, tp.partition, where)], 30)[0]
    return found.offset if found.offset >= 0 else high


ATTEMPT_S = 5.0
"""How long one question about a partition's offsets may wait before it is asked again."""
STALE_EPOCH_S = 5.0
"""How long a client may keep meeting FENCED_LEADER_EPOCH before it is given up for new ones."""


def watermark_offsets(
    consumer: Consumer, tp: TopicPartition, timeout: float = 30
) -> tuple[int, int]:
    """(low, high) of `tp`, asked again while its leader is moving (a broker restarting, a
    topic just created) until `timeout` seconds have passed.

    After a failed question the topic's metadata is fetched: a consumer left idle (a
    restorer's) may keep the leaders it knew before a broker of the cluster failed, and
    librdkafka went on sending it to the dead broker or calling the partition unknown for
    over 40 s, where one metadata request set it right at once. A client whose leader epoch
    stays older than the leader's (FENCED_LEADER_EPOCH for STALE_EPOCH_S, seen for 30 s on
    three brokers after two broker faults, fresh metadata or not) raises Rejoin: new clients
    of a new membership ask again, which worked at once."""
    stale = _StaleClient(f"{tp.topic}[{tp.partition}]")

    def ask() -> tuple[int, int]:
        try:
            return consumer.get_watermark_offsets(tp, min(timeout, ATTEMPT_S))
        except KafkaException as error:
            stale.met(error)
            _refresh(consumer, [tp.topic])
            raise

    return _asking_again(ask, timeout)


class _StaleClient:
    """How long a client has kept answering as only new clients can set right (an old leader
    epoch): past STALE_EPOCH_S, Rejoin, so a new membership's clients ask again."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.since: float | None = None

    def met(self, error: Exception) -> bool:
        """Whether `error` is an old leader epoch (FENCED_LEADER_EPOCH); Rejoin if such
        answers have lasted STALE_EPOCH_S."""
        if not _fenced(error):
            return False
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        if now - self.since >= STALE_EPOCH_S:
            raise Rejoin(f"{self.what}: {error}") from None
        return True


def _fenced(error: Exception) -> bool:
    """Whether a client's leader epoch was older than the leader's (FENCED_LEADER_EPOCH)."""
    err = error.args[0] if error.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError.FENCED_LEADER_EPOCH


def _refresh(client: Consumer | AdminClient, topics: Iterable[str]) -> None:
    """Fetch the topics' metadata, which sets a client's stale leaders and epochs right."""
    for topic in topics:
        with contextlib.suppress(KafkaException):
            client.list_topics(topic, timeout=ATTEMPT_S)


def _asking_again(ask: Callable[[], T], timeout: float) -> T:
    """`ask()`, again while it meets a passing failure, until `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with reaching_kafka():
                return ask()
        except Unreachable:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


Partition = tuple[str, int]


def end_offsets(
    admin: AdminClient, partitions: Iterable[Partition], *, committed: bool, timeout: float = 30
) -> dict[Partition, int]:
    """Where each partition ends: for `committed` readers its last stable offset, which stops
    at the first record of the earliest transaction still open, whoever wrote it; else past
    every record written, open transactions' included. Asked again while a leader moves.

    An admin client never looks a partition's leader up again by itself: one that knew a
    leader before its broker was killed kept asking the dead broker (no end, -1001, each
    question waiting out its whole timeout) long after the leader had moved, and one that
    knew it before the broker came back kept sending the old leader epoch
    (FENCED_LEADER_EPOCH), where one metadata request set either right at once. So each
    question waits ATTEMPT_S at most, the topics' metadata is fetched after either answer,
    and a client still fenced after STALE_EPOCH_S raises Rejoin, so new clients of a new
    membership ask again. Each stage of a pipeline had waited out the whole `timeout` on a
    mark's ends in turn, and a task its output's ends when it took its partitions over
    (issue 24)."""
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
    if not request:
        return {}
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    topics = sorted({tp.topic for tp in request})
    stale = _StaleClient(f"the ends of {topics}")

    def ask() -> dict[Partition, int]:
        try:
            answers = admin.list_offsets(
                request, isolation_level=isolation, request_timeout=min(timeout, ATTEMPT_S)
            )
            wait = min(timeout, ATTEMPT_S) + 5  # past its request timeout: TimeoutError
            ends = {(tp.topic, tp.partition): f.result(wait).offset for tp, f in answers.items()}
            unknown = sorted(tp for tp, end in ends.items() if end < 0)
            if unknown:  # -1001 while a broker restarts: no end, but a leader on its way
                raise Unreachable(f"no end offset yet for {unknown}")
            return ends
        except (KafkaException, Unreachable) as error:
            # no end (a leader moving, or gone unseen) or an old epoch: set right by metadata;
            # a broker away is librdkafka's to reach again
            if stale.met(error) or isinstance(error, Unreachable):
                _refresh(admin, topics)
            raise

    return _asking_again(ask, timeout)


def records(msgs: Iterable[Message]) -> list[Message]:
    """The messages that carry records; end-of-partition events and passing errors dropped,
    any other error raised (`errors.check`)."""
    out = []
    for msg in msgs:
        err = msg.error()
        if err is None:
            out.append(msg)
        elif err.code() != KafkaError._PARTITION_EOF:
            check(err)
    return out


class Ends:
    """Whether a consumer has read a set of partitions to their end.

    A partition's end is where the broker said it ended when it was added (read_committed: the
    last stable offset). It is reached when the consumer reports the partition's end
    (`enable.partition.eof`), hands over the record before it, or has a position past it — a
    transaction's marker takes an offset that no message reports.

    `moved` is when the reading last went forward (a record, an end reached, a position that
    changed, partitions added): a reader that stands still while partitions are pending waits
    on its client, not on the data (`stalled_for`).
    """

    def __init__(self, consumer: Consumer, clock: Callable[[], float] = time.monotonic) -> None:
        self.consumer = consumer
        self.clock = clock
        self.ends: dict[Partition, int] = {}
        self.pending: set[Partition] = set()
        self.backlog = 0  # records (and markers) between the starts and the ends
        self.moved = clock()
        self._positions: dict[Partition, int] = {}  # of the pending partitions, last seen

    def add(self, partitions: Iterable[Partition], starts: Mapping[Partition, int] = {}) -> None:
        """Read these partitions to where they end now, from `starts` (else their start)."""
        for topic, partition in partitions:
            low, high = watermark_offsets(self.consumer, TopicPartition(topic, partition))
            self.ends[(topic, partition)] = high
            start = max(low, starts.get((topic, partition), low))
            if high > start:
                self.pending.add((topic, partition))
                self.backlog += high - start
        self.moved = self.clock()

    def remove(self, partitions: Iterable[Partition]) -> None:
        for tp in partitions:
            self.ends.pop(tp, None)
            self.pending.discard(tp)
            self._positions.pop(tp, None)

    def stalled_for(self) -> float:
        """Seconds since the reading last went forward while partitions are pending, else 0."""
        return self.clock() - self.moved if self.pending else 0.0

    @property
    def done(self) -> bool:
        return not self.pending

    def records(self, msgs: Iterable[Message]) -> list[Message]:
        """`records(msgs)`, noting the partitions whose end they reach."""
        out, pending, moved = [], self.pending, False
        for msg in msgs:
            err = msg.error()
            if err is None:
                out.append(msg)
                tp = (msg.topic(), msg.partition())
                if tp in pending:
                    moved = True
                    if msg.offset() + 1 >= self.ends[tp]:
                        pending.discard(tp)
            elif err.code() == KafkaError._PARTITION_EOF:
                pending.discard((msg.topic(), msg.partition()))
                moved = True
            else:
                check(err)
        if moved:
            self.moved = self.clock()
        return out

    def check_positions(self) -> None:
        """Partitions whose position has passed their end (past a transaction's marker)."""
        if self.pending:
            for tp in self.consumer.position([TopicPartition(*tp) for tp in self.pending]):
                at = (tp.topic, tp.partition)
                if self._positions.get(at) != tp.offset:
                    self._positions[at] = tp.offset
                    self.moved = self.clock()
                if tp.offset >= self.ends[at]:
                    self.pending.discard(at)


def read_to_end(
    ends: Ends,
    apply: Callable[[list[Message]], None],
    *,
    timeout: float | None = None,
    batch: int = 5000,
) -> None:
    """Consume until every partition of `ends` is read to its end, handing each batch's
    records to `apply`; `Unreachable` if that takes longer than `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    consumer = ends.consumer
    while not ends.done:
        if deadline is not None and time.monotonic() > deadline:
            raise Unreachable(f"{sorted(ends.pending)} not read to their end in {timeout:.0f} s")
        apply(ends.records(consumer.consume(batch, 0.1)))
        ends.check_positions()


def read_compacted(
    bootstrap: str, topic: str, reader: str, kafka: dict | None = None
) -> dict[str, bytes]:
    """Latest value per key of partition 0 of a compacted topic, up to its current end;
    `reader` is the consumer's group id (`kafka.reader_group`)."""
    consumer = Consumer(consumer_config(bootstrap, reader=reader, extra=kafka))
    latest: dict[str, bytes] = {}

    def apply(msgs: list) -> None:
        for msg in msgs:
            key = msg.key().decode() if msg.key() else ""
            if msg.value() is None:
                latest.pop(key, None)
            else:
                latest[key] = msg.value()

    try:
        ends = Ends(consumer)
        ends.add([(topic, 0)])
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        read_to_end(ends, apply)
    finally:
        consumer.close()
    return latest
