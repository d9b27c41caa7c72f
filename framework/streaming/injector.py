"""Injectors: processes that bring outside data into a pipeline and seed its low watermark
(MillWheel §5.2).

An injector writes records to source streams declared with `InjectorWatermark(name, processes)`
and, from time to time, promises a low watermark: no record it writes later is older. Each
promise commits in one transaction with the records before it and names the offsets they
landed at, so readers apply it only after reading them (invariant 4). With several processes,
the source's watermark is the minimum over all of them, and unknown until each has reported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.pipeline import InjectorWatermark, Pipeline, PipelineError
from framework.core.watermarks import Mark, encode_mark, injector_producer
from framework.errors import Fatal
from framework.kafka.bounded_calls import BoundedCalls, LeftBehind
from framework.kafka.collector import ID_HEADER, Collector
from framework.kafka.config import producer_config
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import stream_encoder
from framework.kafka.topics import create_part_topics


class Injector:
    """One process of the injector `name` of `pipeline`; use as a context manager."""

    def __init__(
        self,
        pipeline: Pipeline,
        name: str,
        *,
        bootstrap: str,
        process: int = 0,
        kafka: dict | None = None,
        registry: RegistrySettings | None = None,
    ) -> None:
        self.streams = {
            s.stream: stream_encoder(pipeline, s.stream, registry)
            for s in pipeline.sources.values()
            if isinstance(s.watermark, InjectorWatermark) and s.watermark.injector == name
        }
        if not self.streams:
            raise PipelineError(
                f"pipeline {pipeline.name!r} has no source with watermark="
                f"InjectorWatermark({name!r}): declare the streams this injector writes"
            )
        processes = {
            s.watermark.processes
            for s in pipeline.sources.values()
            if isinstance(s.watermark, InjectorWatermark) and s.watermark.injector == name
        }
        self._max_future = min(
            s.watermark.max_future_ms
            for s in pipeline.sources.values()
            if isinstance(s.watermark, InjectorWatermark) and s.watermark.injector == name
        )
        if not 0 <= process < min(processes):
            raise PipelineError(f"injector {name!r}: process must be in 0..{min(processes) - 1}")
        create_part_topics(bootstrap, pipeline, name, kafka)
        self.channel = f"{pipeline.name}.{name}.watermarks"
        self.producer_id = injector_producer(name, process)
        txn_id = f"{pipeline.name}.{name}.injector-{process}"
        self._collector = Collector(
            producer_config(bootstrap, transactional_id=txn_id, extra=kafka)
        )
        self._producer = self._collector.producer
        # transactional calls may block past their timeout (librdkafka#5456): left behind
        self._calls = BoundedCalls(f"{pipeline.name}.{name}.injector", name)
        self._transactional(self._producer.init_transactions, 60)
        self._claim_streams()
        self._producer.begin_transaction()
        self.watermark = MIN_TIME
        self._sequence = 0
        self._promised: tuple[int, bool, int] | None = None  # watermark, idle, records sent
        self._id_prefix = f"{txn_id}-{time.time_ns():x}-"

    def _claim_streams(self) -> None:
        """Count what the streams hold already as written by this process (after
        `init_transactions` ended an earlier incarnation's transaction). A reader that starts
        gets only the channel's latest mark: were it this incarnation's, naming only the
        partitions it wrote, the reader would apply its watermark at once to another
        partition whose older records it has yet to read, and they would all be late."""
        topics = self._producer.list_topics(timeout=60).topics
        self._partitions = {t: len(topics[t].partitions) for t in self.streams}
        self._collector.claim_ends([(t, p) for t in self.streams for p in topics[t].partitions])

    def send(
        self,
        stream: str,
        value: Any,
        *,
        key: str | None,
        timestamp: int,
        record_id: str | None = None,
    ) -> None:
        """Write a record; it becomes visible with the next `advance`. A `record_id` that
        names the record's origin lets readers recognise it if it is ever sent again."""
        encode = self.streams.get(stream)
        if encode is None:
            raise PipelineError(f"this injector writes {sorted(self.streams)}, not {stream!r}")
        self._sequence += 1
        self._collector.send(
            stream,
            None if key is None else key.encode(),
            encode(value),
            timestamp=timestamp,
            headers=[(ID_HEADER, (record_id or f"{self._id_prefix}{self._sequence}").encode())],
        )

    def advance(self, watermark: int, *, idle: bool = False) -> None:
        """Commit what was sent and promise that nothing later is older than `watermark`; a
        promise beyond wall time plus `max_future_ms` (a file stamped in the future) promises
        only that much; nothing at all if neither moved since the last promise (an idle
        injector that advances on a timer writes nothing to the broker)."""
        watermark = min(watermark, now_ms() + self._max_future)
        self.watermark = max(self.watermark, watermark)
        promise = (self.watermark, idle, self._sequence)
        if promise == self._promised:
            return
        try:
            self._collector.flush()
            written = self._collector.written
            mark = Mark.of(
                self.producer_id,
                self.watermark,
                idle,
                written,
                self.streams,
                partitions=self._partitions,
            )
            self._collector.send(
                self.channel, self.producer_id.encode(), encode_mark(mark), partition=0
            )
            self._transactional(self._producer.commit_transaction, 60)
        except KafkaException as error:
            raise Fatal(f"injector commit failed: {error}") from error
        self._promised = promise
        self._producer.begin_transaction()

    def _transactional(self, call, timeout: float) -> None:
        """`call(timeout)`; `Fatal` if it is still blocked 10 s past its timeout: this
        injector is done, and a new one (same process number) fences and aborts it."""
        try:
            self._calls.call(call, timeout, wait=timeout + 10)
        except LeftBehind as error:
            raise Fatal(f"injector: {error} (librdkafka#5456): make a new Injector") from None

    def close(self) -> None:
        try:
            self._transactional(self._producer.abort_transaction, 30)
        except Fatal:
            return  # its transaction is aborted by the next injector with its id
        self._producer.flush(30)
        self._calls.close()

    def __enter__(self) -> Injector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileInjector:
    """MillWheel's Figure 10: ingest files of JSON lines from a directory; the low watermark is
    the oldest creation (modification) time among the files not yet finished.

    Only regular files directly in `directory` are read: a symlink is skipped (it could point
    the injector at any file its user may read), and a record's id is `<file name>:<line>`,
    relative to the directory, so ids say nothing of the machine's paths."""

    def __init__(
        self,
        injector: Injector,
        stream: str,
        directory: Path,
        parse: Callable[[str], tuple[str | None, Any, int]],
    ) -> None:
        self.injector, self.stream, self.directory, self.parse = injector, stream, directory, parse
        self.done: set[str] = set()

    def pending(self) -> list[Path]:
        return sorted(
            (
                p
                for p in self.directory.glob("*")
                if p.is_file() and not p.is_symlink() and p.name not in self.done
            ),
            key=lambda p: p.stat().st_mtime,
        )

    def run_once(self) -> int:
        """Ingest every file present now, one transaction per file; returns records sent.
        With nothing left to read the watermark is now: a later file is created later."""
        sent = 0
        for path in self.pending():
            for n, (key, value, timestamp) in enumerate(_lines(path, self.parse)):
                self.injector.send(
                    self.stream, value, key=key, timestamp=timestamp, record_id=f"{path.name}:{n}"
                )
                sent += 1
            self.done.add(path.name)
            self.injector.advance(self._low())
        if not sent:
            self.injector.advance(self._low())
        return sent

    def _low(self) -> int:
        return min((_created_ms(p) for p in self.pending()), default=now_ms())


def _lines(path: Path, parse: Callable[[str], tuple]) -> Iterator[tuple]:
    # O_NOFOLLOW: a file swapped for a symlink after `pending` listed it is refused, not read.
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW)) as f:
        for line in f:
            if line.strip():
                yield parse(line)


def _created_ms(path: Path) -> int:
    return int(os.stat(path).st_mtime * 1000)
