"""Following watermark channels: each computation's compacted topic of published marks,
read by every process whose inputs that computation writes (invariant 4's reading side)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.dead_letters import undecodable
from framework.core.watermarks import Mark, Published, decode_mark
from framework.kafka.errors import Unreachable
from framework.kafka.reading import Ends, end_offsets, read_to_end, records


class WatermarkChannels:
    """Follows watermark channels (single-partition compacted topics) for one process and
    hands each published mark to the partitions that wait for it."""

    def __init__(self, config: dict, admin: AdminClient) -> None:
        self._consumer = Consumer(config)
        self._admin = admin
        self._topics: set[str] = set()
        self._latest: dict[str, Mark] = {}
        self._listeners: dict[str, list[Published]] = {}

    def follow(self, topics: Iterable[str]) -> None:
        new = [t for t in topics if t not in self._topics]
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
        for msg in msgs:
            if msg.value() is None:  # the producer's event time was reset
                self._latest.pop(f"{msg.topic()}|{msg.key().decode(errors='replace')}", None)
                continue
            try:
                mark = decode_mark(msg.value())
            except Exception as error:  # never a crash: skipped, counted, said once a minute
                undecodable(msg.topic(), error)
                continue
            name = f"{msg.topic()}|{mark.producer}"
            self._latest[name] = mark
            for listener in self._listeners.get(name, ()):
                listener.offer(mark)

    def latest(self, channel: str, producer: str) -> Mark | None:
        return self._latest.get(f"{channel}|{producer}")

    def listen(self, channels: Iterable[str], published: Published) -> None:
        for channel in channels:
            for producer in published.producers:
                name = f"{channel}|{producer}"
                self._listeners.setdefault(name, []).append(published)
                if name in self._latest:
                    published.offer(self._latest[name])

    def forget(self, published: Published) -> None:
        for listeners in self._listeners.values():
            if published in listeners:
                listeners.remove(published)

    def close(self) -> None:
        self._consumer.close()
