"""Following watermark channels: each computation's compacted topic of published marks,
read by every process whose inputs that computation writes (invariant 4's reading side)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from framework.core.dead_letters import undecodable
from framework.core.watermarks import Mark, Published, decode_mark

log = logging.getLogger(__name__)


class WatermarkChannels:
    """Follows watermark channels (single-partition compacted topics) for one process and
    hands each published mark to the partitions that wait for it."""

    def __init__(self, config: dict) -> None:
        self._consumer = Consumer(config)
        self._topics: set[str] = set()
        self._at_end: dict[str, bool] = {}
        self._latest: dict[str, Mark] = {}
        self._listeners: dict[str, list[Published]] = {}

    def follow(self, topics: Iterable[str]) -> None:
        new = [t for t in topics if t not in self._topics]
        if new:
            self._topics.update(new)
            self._consumer.incremental_assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in new])

    def catch_up(self, timeout: float = 30.0) -> None:
        """Read every followed channel to its end (its last stable offset: an injector's open
        transaction is not waited for), so a task taking over a partition continues from its
        previous owner's last mark."""
        deadline = time.monotonic() + timeout
        while not all(self._at_end.get(t) for t in self._topics):
            if time.monotonic() > deadline:
                log.warning("watermark channels not read to their end in %.0fs", timeout)
                return
            self._poll(0.05)

    def poll(self) -> None:
        self._poll(0)

    def _poll(self, timeout: float) -> None:
        for msg in self._consumer.consume(1000, timeout):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._at_end[msg.topic()] = True
                continue
            self._at_end[msg.topic()] = False
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
