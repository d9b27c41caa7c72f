"""Stand-ins for a membership's Kafka clients and its readers, for unit tests of the pieces that
drive them (committer, task manager, the membership's loop): each call they get is written down
as a test reads it back. Behaviour that lives in Kafka is tested against the real broker in
tests/integration."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from framework.kafka.collector import Collector
from framework.kafka.limits import TopicLimits

Partition = tuple[str, int]


class FakeProducer:
    """A transactional producer: what is sent joins the open transaction, which a commit
    makes `committed` (its offsets too, into the group's `offsets` if given) and an abort
    drops."""

    def __init__(self, log: list[str], offsets: dict[Partition, int] | None = None) -> None:
        self.log = log
        self.fail_commit: KafkaError | None = None  # every commit, until set back to None
        self.fail_next: KafkaError | None = None  # the next commit only
        self.refuse: Callable[[list[tuple]], KafkaError | None] | None = None  # by content
        self.offsets = offsets
        self.open: list[tuple] = []  # (topic, partition, key, value) in the open transaction
        self.committed: list[tuple] = []
        self.flushes = 0
        self._sent_offsets: list[TopicPartition] = []

    def init_transactions(self, timeout):
        self.log.append("init")

    def begin_transaction(self):
        self.log.append("begin")

    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        self.log.append(f"offsets {[(o.topic, o.partition, o.offset) for o in offsets]}")
        self.metadata = json.loads(offsets[0].metadata)
        self._sent_offsets = list(offsets)

    def commit_transaction(self, timeout):
        failure, self.fail_next = self.fail_next or self.fail_commit, None
        if failure is None and self.refuse is not None:
            failure = self.refuse(self.open)
        if failure is not None:
            raise KafkaException(failure)
        self.log.append("commit")
        self.committed += self.open
        if self.offsets is not None:
            self.offsets.update({(o.topic, o.partition): o.offset for o in self._sent_offsets})
        self.open, self._sent_offsets = [], []

    def abort_transaction(self, timeout):
        self.log.append("abort")
        self.open, self._sent_offsets = [], []

    def flush(self, timeout=None):
        self.flushes += 1
        return 0

    def poll(self, timeout=None):
        return 0


class FakeCollector:
    def __init__(
        self, log: list[str] | None = None, offsets: dict[Partition, int] | None = None
    ) -> None:
        self.log = [] if log is None else log
        self.producer = FakeProducer(self.log, offsets)
        self.limits = TopicLimits()
        self.written: dict = {}
        self.poisoned: dict = {}
        self.delivered: Counter[str] = Counter()

    def flush(self):
        self.log.append("flush")

    def poll(self, timeout=0):
        self.producer.poll(timeout)

    def send(self, topic, key, value, *, partition=None, **kwargs):
        self.send_all([(topic, key, value, partition, 0, None)])

    def send_all(self, records):
        for topic, key, value, partition, _timestamp, _headers in records:
            self.log.append(f"send {topic}")
            self.producer.open.append((topic, partition, key, value))

    def discard_errors(self):
        self.log.append("discard")

    def refusal(self):
        return None

    def remember(self, offsets):
        pass

    claim_ends = Collector.claim_ends  # the real one: through `remember`, with the admin given


class Clock:
    """Monotonic seconds a test moves."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def message(topic: str, partition: int, offset: int, key: str, value: dict) -> Message:
    return Message(
        topic=topic,
        partition=partition,
        offset=offset,
        key=key.encode(),
        value=json.dumps(value).encode(),
        timestamp=(1, 1_000 + offset),
    )


class FakeConsumer:
    """A group member's consumer: committed offsets as given, assignment, fetch positions and
    pauses kept. `records` holds what its partitions hold (offset = index); the rebalance
    callbacks given to `subscribe` run inside a later `consume` or `poll`, as librdkafka runs
    them, by `rebalance` and `lose` (the eager protocol: a rebalance revokes everything and
    assigns anew). Each consume or poll moves `clock` on by `step` seconds."""

    def __init__(
        self, committed: dict[Partition, int] | None = None, log: list | None = None
    ) -> None:
        self._committed = {} if committed is None else committed
        self.calls: list[tuple] = []
        self.paused: set[Partition] = set()
        self.records: dict[Partition, list[Message]] = {}
        self.positions: dict[Partition, int] = {}  # the assignment: partition -> fetch position
        self.log = log  # consume and poll calls, if given
        self.clock, self.step = Clock(), 0.1
        self.events: list[tuple[float, str, Partition]] = []  # (clock, pause or resume, tp)
        self.closed = False
        self._callbacks: dict[str, Callable] = {}
        self._actions: list[tuple[Callable[[], bool], Callable[[], None]]] = []
        self._stop: tuple[Callable[[], bool], threading.Event, int] | None = None
        self.rounds = 0

    # -- what a test arranges ---------------------------------------------------------------

    def add(self, topic: str, partition: int, keys: str) -> None:
        """Append one record per character of `keys` to the partition, keyed by it."""
        log = self.records.setdefault((topic, partition), [])
        for key in keys:
            log.append(message(topic, partition, len(log), key, {"key": key}))

    def inside(self, action: Callable[[], None], when: Callable[[], bool] = lambda: True) -> None:
        """Run `action` inside the first consume or poll at which `when()` holds."""
        self._actions.append((when, action))

    def rebalance(self, assign: list[Partition]) -> None:
        """Revoke the assignment, if any, then assign `assign` (inside a client call)."""
        if self.positions:
            self._callback("on_revoke", list(self.positions))
            self.positions, self.paused = {}, set()
        self._callback("on_assign", assign)

    def lose(self) -> None:
        """The session timed out: the assignment is lost (inside a client call)."""
        self._callback("on_lost", list(self.positions))
        self.positions, self.paused = {}, set()

    def stop_when(self, done: Callable[[], bool], stop: threading.Event, rounds: int = 300) -> None:
        """Set `stop` at the first client call after `done()` holds; fail past `rounds` calls."""
        self._stop = (done, stop, rounds)

    def _callback(self, name: str, tps: list[Partition]) -> None:
        try:
            self._callbacks[name](self, [TopicPartition(t, p) for t, p in tps])
        except BaseException as error:  # what confluent-kafka makes of it
            raise SystemError(f"{name} raised through the client: {error!r}") from error

    def _call(self) -> bool:
        """Run what is due inside this call; False if the test is done."""
        self.rounds += 1
        self.clock.now += self.step
        for due in [a for a in self._actions if a[0]()]:
            self._actions.remove(due)
            due[1]()
        if self._stop is not None:
            done, stop, rounds = self._stop
            assert self.rounds <= rounds, f"not done after {rounds} client calls"
            if done():
                stop.set()
                return False
        return True

    def _fetch(self, n: int) -> list[Message]:
        out: list[Message] = []
        for tp in sorted(self.positions):
            if tp in self.paused:
                continue
            log, position = self.records.get(tp, []), self.positions[tp]
            while position < len(log) and len(out) < n:
                out.append(log[position])
                position += 1
            self.positions[tp] = position
        return out

    # -- the client ---------------------------------------------------------------------------

    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None):
        self._callbacks = {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}

    def consume(self, num_messages=1, timeout=-1):
        if self.log is not None:
            self.log.append(("consume", timeout))
        return self._fetch(num_messages) if self._call() else []

    def poll(self, timeout=None):
        if self.log is not None:
            self.log.append(("poll", timeout))
        msgs = self._fetch(1) if self._call() else []
        return msgs[0] if msgs else None

    def consumer_group_metadata(self):
        return object()

    def committed(self, tps, timeout):
        offsets = self._committed
        return [
            TopicPartition(tp.topic, tp.partition, offsets.get((tp.topic, tp.partition), -1001))
            for tp in tps
        ]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return (0, len(self.records.get((tp.topic, tp.partition), ())))

    def assign(self, tps):
        self.calls.append(("assign", [(t.topic, t.partition, t.offset) for t in tps]))
        self.positions = {(t.topic, t.partition): max(0, t.offset) for t in tps}

    def pause(self, tps):
        self.paused |= {(t.topic, t.partition) for t in tps}
        self.events += [(self.clock.now, "pause", (t.topic, t.partition)) for t in tps]

    def resume(self, tps):
        self.paused -= {(t.topic, t.partition) for t in tps}
        self.events += [(self.clock.now, "resume", (t.topic, t.partition)) for t in tps]

    def seek(self, tp):
        self.calls.append(("seek", (tp.topic, tp.partition, tp.offset)))
        if (tp.topic, tp.partition) in self.positions:
            self.positions[(tp.topic, tp.partition)] = tp.offset

    def position(self, tps):
        return [
            TopicPartition(t.topic, t.partition, self.positions.get((t.topic, t.partition), -1001))
            for t in tps
        ]

    def close(self):
        """Leaving the group revokes the assignment first, as librdkafka's close does."""
        if self.positions and self._callbacks:
            self._callback("on_revoke", list(self.positions))
        self.positions, self.closed = {}, True


class FakeAdmin:
    """An admin client whose partitions all end at offset 0."""

    def list_offsets(self, request, **kwargs):
        answers = {}
        for tp in request:
            answers[tp] = future = Future()
            future.set_result(SimpleNamespace(offset=0))
        return answers


class FakeRestorer:
    """Restores nothing: a store added is done once named in `done`, or at once if `instant`."""

    def __init__(self, instant: bool = False) -> None:
        self.added: dict[int, object] = {}
        self.removed: list[int] = []
        self.done: list[int] = []
        self.instant = instant
        self.consumer = FakeConsumer()

    def add(self, partition, store, standby=False):
        self.added[partition] = store

    def remove(self, partition):
        self.removed.append(partition)
        self.added.pop(partition, None)

    def restoring(self):
        return bool(self.added)

    def busy(self):
        return bool(self.added)

    def step(self, timeout=0.0):
        done = list(self.added) if self.instant else [p for p in self.done if p in self.added]
        self.done = []
        return [(p, self.added.pop(p)) for p in done]


class FakeChannels:
    """Watermark channels on which nothing is ever published."""

    closed = False

    def follow(self, topics):
        pass

    def poll(self):
        return 0

    def catch_up(self):
        pass

    def latest(self, channel, producer):
        return None

    def listen(self, channels, published):
        pass

    def forget(self, published):
        pass

    def close(self):
        self.closed = True
