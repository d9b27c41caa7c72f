"""Following watermark channels: each computation's compacted topic of published marks,
read by every process whose inputs that computation writes (invariant 4's reading side), and
refusing the marks no writer could have published (framework/core/forgery.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.clock import now_ms
from framework.core.dead_letters import undecodable
from framework.core.forgery import (
    DEFAULT_ALLOWANCE_MS,
    check_ends,
    check_mark,
    check_names,
)
from framework.core.watermarks import Mark, Published, decode_mark
from framework.errors import ForgedRecord
from framework.kafka.errors import Unreachable
from framework.kafka.topic_ends import Ends, end_offsets, read_to_end, records

Refusal = Callable[[Message, ForgedRecord], None]


class WatermarkChannels:
    """Follows watermark channels (single-partition compacted topics) with `consumer` and
    hands each published mark to the partitions that wait for it — once it passed the checks
    of framework/core/forgery.py: a mark that claims a time beyond `allowance_ms` ahead of
    wall time, an offset beyond the end of a partition of `counts` (topic -> partitions: the
    topics whose offsets matter to this process), or that does not name a waiting partition,
    is never applied nor kept, and goes to `refuse` (once per record read)."""

    def __init__(
        self,
        consumer: Consumer,
        admin: AdminClient,
        *,
        allowance_ms: int = DEFAULT_ALLOWANCE_MS,
        counts: Mapping[str, int] | None = None,
        refuse: Refusal | None = None,
        wall: Callable[[], int] = now_ms,
    ) -> None:
        self._consumer = consumer  # assigns the channels itself, in no group
        self._admin = admin
        self._topics: set[str] = set()
        self._latest: dict[str, tuple[Message, Mark]] = {}
        self._listeners: dict[str, list[Published]] = {}
        self._allowance = allowance_ms
        self._counts = dict(counts or {})
        self._ends: dict[tuple[str, int], int] = {}  # known end offsets (they only grow)
        self._refuse = refuse
        self._refused: set[tuple[str, int]] = set()
        self._wall = wall

    def follow(self, topics: Iterable[str]) -> None:
        # two inputs written by one injector or computation share its channel: assign it once
        new = list(dict.fromkeys(t for t in topics if t not in self._topics))
        if new:
            self._topics.update(new)
            self._consumer.incremental_assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in new])

    def catch_up(self, timeout: float = 60.0, settle: bool = True) -> None:
        """Read every followed channel to where it ends now, once each transaction open in it
        now has ended, so a task taking over a partition continues from its previous owner's
        last mark. A read_committed reader stops at the first open transaction: another
        process's, begun before that owner's last commit, would hide the commit, and the task
        would publish a lower watermark than its owner had. Transactions begun later (the
        injector keeps one open) are not waited for, nor any without `settle` (a reader that
        only shows marks). `Unreachable` after `timeout` seconds: a transaction left open by
        a killed process lasts until the broker aborts it."""
        partitions = [(t, 0) for t in self._topics]
        deadline = time.monotonic() + timeout
        if settle:
            self._settle(partitions, deadline, timeout)
        ends = Ends(self._consumer)
        ends.add(partitions)
        read_to_end(ends, self._apply, timeout=max(1.0, deadline - time.monotonic()), batch=1000)

    def _settle(self, partitions: list[tuple[str, int]], deadline: float, timeout: float) -> None:
        """Wait until the last stable offsets reach where the channels end now."""
        written = end_offsets(self._admin, partitions, committed=False)
        while True:
            stable = end_offsets(self._admin, partitions, committed=True)
            waiting = sorted(tp for tp in partitions if stable[tp] < written[tp])
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise Unreachable(f"transactions in {waiting} still open after {timeout:.0f} s")
            time.sleep(0.05)

    def poll(self) -> int:
        """Apply the marks published since the last call; returns how many were read."""
        msgs = records(self._consumer.consume(1000, 0))
        self._apply(msgs)
        return len(msgs)

    def _apply(self, msgs: list) -> None:
        decoded: list[tuple[Message, Mark | None]] = []
        for msg in msgs:
            if msg.value() is None:  # the producer's event time was reset
                decoded.append((msg, None))
                continue
            try:
                decoded.append((msg, decode_mark(msg.value())))
            except Exception as error:  # never a crash: refused, counted, said once a minute
                undecodable(msg.topic(), error)
                self._refused_record(msg, ForgedRecord("watermark", f"undecodable: {error}"))
        self._learn_ends(mark for _, mark in decoded if mark is not None)
        for msg, mark in decoded:
            if mark is None:
                self._latest.pop(f"{msg.topic()}|{msg.key().decode(errors='replace')}", None)
                continue
            name = f"{msg.topic()}|{mark.producer}"
            listeners = self._listeners.get(name, ())
            try:
                check_mark(mark, self._wall(), self._allowance)
                check_ends(mark, {tp: self._ends.get(tp, 0) for tp in self._checked(mark)})
                for listener in listeners:
                    check_names(mark, listener.topic, listener.partition)
            except ForgedRecord as forged:
                self._refused_record(msg, forged)
                continue
            self._latest[name] = (msg, mark)
            for listener in listeners:
                listener.offer(mark)

    def _checked(self, mark: Mark) -> list[tuple[str, int]]:
        return [tp for tp in mark.offsets if tp[0] in self._counts]

    def _learn_ends(self, marks: Iterable[Mark]) -> None:
        """Ask the broker, at once for a batch, where the partitions end that some mark names
        beyond the ends known so far (a partition outside the topic's count ends at 0)."""
        wanted = set()
        for mark in marks:
            for tp in self._checked(mark):
                if tp[1] >= self._counts[tp[0]]:
                    self._ends[tp] = 0
                elif mark.offsets[tp] >= self._ends.get(tp, 0):
                    wanted.add(tp)
        if wanted:
            self._ends.update(end_offsets(self._admin, sorted(wanted), committed=False))

    def _refused_record(self, msg: Message, forged: ForgedRecord) -> None:
        if (msg.topic(), msg.offset()) in self._refused:
            return
        self._refused.add((msg.topic(), msg.offset()))
        if self._refuse is not None:
            self._refuse(msg, forged)

    def latest(self, channel: str, producer: str) -> Mark | None:
        latest = self._latest.get(f"{channel}|{producer}")
        return None if latest is None else latest[1]

    def listen(self, channels: Iterable[str], published: Published) -> None:
        for channel in channels:
            for producer in published.producers:
                name = f"{channel}|{producer}"
                self._listeners.setdefault(name, []).append(published)
                if name in self._latest:
                    msg, mark = self._latest[name]
                    try:
                        check_names(mark, published.topic, published.partition)
                    except ForgedRecord as forged:
                        del self._latest[name]
                        self._refused_record(msg, forged)
                    else:
                        published.offer(mark)

    def forget(self, published: Published) -> None:
        for listeners in self._listeners.values():
            if published in listeners:
                listeners.remove(published)

    def close(self) -> None:
        self._consumer.close()
