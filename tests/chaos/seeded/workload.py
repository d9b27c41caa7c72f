"""The input of the seeded chaos run: wordcount lines and windowed events at a steady rate,
and malformed records of every shape mixed into both.

The feeders write through the broker's outages (a plain idempotent producer that never gives a
record up for wordcount; an injector that re-sends its window and promise after a failed
transaction for the windowed pipeline). What really landed is read back by the verifier, so
the truth never depends on what a feeder believes it wrote.

Malformed shapes and what the pipeline must make of them (the verifier derives the same from
each record alone):

| shape | wordcount `lines` (JSON) | windowed `events` (Avro zeitgeist.SearchQuery) |
| --- | --- | --- |
| garbage | decode | decode |
| null | decode (a tombstone) | decode |
| wrong-shape | process_record (no "line") | decode (JSON on an Avro stream) |
| avro-unknown | decode (not JSON) | decode (unknown writer fingerprint) |
| oversized | produce (a 1.5 MB word over `words`' limit) | produce (1.5 MB re-keyed record) |
| ts-zero | counted like any line (0 is a valid time) | not sent: lateness would depend on timing |
| ts-3000 | produce (its words are more than an hour ahead) | produce (re-keyed record ahead) |

Kafka 4 refuses a record more than an hour ahead at produce time, so the input topics of the
run accept what a lax producer elsewhere could have written: `message.timestamp.after.max.ms`
and `max.message.bytes` are raised on them (and only on them); the pipeline must then refuse
to carry such records further and dead-letter them.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from framework.serde.catalogue import encoder_for
from framework.streaming.injector import Injector
from tests.chaos.windows_job import WINDOW

log = logging.getLogger(__name__)

YEAR_3000_MS = 32_503_680_000_000
OVERSIZED = 1_500_000
INPUT_MAX_BYTES = 4 * 1024 * 1024
WORDCOUNT_SHAPES = ("garbage", "null", "wrong-shape", "avro-unknown", "oversized", "ts-zero")
WORDCOUNT_SHAPES += ("ts-3000",)
WINDOWS_SHAPES = ("garbage", "null", "wrong-shape", "avro-unknown", "oversized", "ts-3000")
QUERIES = [f"q{i}" for i in range(40)]


def open_input_topics(bootstrap: str, topics: list[str]) -> None:
    """Let the input topics take what a lax outside producer could write (see the module)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry("max.message.bytes", str(INPUT_MAX_BYTES), incremental_operation=SET),
        ConfigEntry("message.timestamp.after.max.ms", str(2**63 - 1), incremental_operation=SET),
    ]
    resources = [ConfigResource("topic", t, incremental_configs=entries) for t in topics]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


SET = AlterConfigOpType.SET


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "message.timeout.ms": 0,  # never give a record up: the broker comes back
            "message.max.bytes": INPUT_MAX_BYTES + 1024,
            "reconnect.backoff.max.ms": 500,
            "linger.ms": 5,
        }
    )


def _produce(producer: Producer, topic: str, value, key, **kwargs) -> None:
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            producer.poll(0.1)


class Malformed:
    """Writes one record of every malformed shape into both inputs per `inject`."""

    def __init__(self, bootstrap: str, lines: str, events: str, seed: int) -> None:
        self.lines, self.events = lines, events
        self.rng = random.Random(seed ^ 0x5EED)
        self.producer = _producer(bootstrap)
        self.sent = 0
        self._avro = encoder_for("zeitgeist.SearchQuery")
        self._lock = threading.Lock()

    def inject(self) -> int:
        with self._lock:
            records = [(self.lines, *self._line(s)) for s in WORDCOUNT_SHAPES]
            records += [(self.events, *self._event(s)) for s in WINDOWS_SHAPES]
            for topic, value, ts in records:
                self.sent += 1
                key = f"bad-{self.sent}".encode()
                kwargs = {} if ts is None else {"timestamp": ts}
                _produce(self.producer, topic, value, key, **kwargs)
            self.producer.poll(0)
            return len(records)

    def flush(self) -> None:
        while self.producer.flush(10):
            pass

    def _garbage(self) -> bytes:
        return b"\xff\xfe" + self.rng.randbytes(self.rng.randrange(1, 64))

    def _unknown_fingerprint(self) -> bytes:
        return b"\xc3\x01" + b"\xde\xad" + self.rng.randbytes(6) + b"\x04q1\x00\x00"

    def _big(self) -> str:
        """Incompressible text, so compression cannot sneak it under a limit."""
        return base64.b64encode(self.rng.randbytes(OVERSIZED * 3 // 4)).decode()

    def _line(self, shape: str) -> tuple[bytes | None, int | None]:
        if shape == "garbage":
            return self._garbage(), None
        if shape == "null":
            return None, None
        if shape == "wrong-shape":
            value = self.rng.choice([{"text": "w1 w2"}, {"line": 42}, ["w1"], "w1 w2"])
            return json.dumps(value).encode(), None
        if shape == "avro-unknown":
            return self._unknown_fingerprint(), None
        if shape == "oversized":
            return json.dumps({"line": f"w1 {self._big()}"}).encode(), None
        line = json.dumps({"line": f"w{self.rng.randrange(50)} tz"}).encode()
        return line, 0 if shape == "ts-zero" else YEAR_3000_MS

    def _event(self, shape: str) -> tuple[bytes | None, int | None]:
        if shape == "garbage":
            return self._garbage(), None
        if shape == "null":
            return None, None
        if shape == "wrong-shape":
            return json.dumps({"query": "q1"}).encode(), None
        if shape == "avro-unknown":
            return self._unknown_fingerprint(), None
        if shape == "oversized":
            return self._avro({"query": self._big()}), None
        return self._avro({"query": self.rng.choice(QUERIES)}), YEAR_3000_MS


class LinesFeeder(threading.Thread):
    """Wordcount lines at `rate` a second until `total`, keyed by their number."""

    VOCABULARY = [f"w{i}" for i in range(2000)]

    def __init__(self, bootstrap: str, topic: str, total: int, rate: int, seed: int) -> None:
        super().__init__(daemon=True, name="lines-feeder")
        self.topic, self.total, self.rate = topic, total, rate
        self.rng = random.Random(seed)
        self.producer = _producer(bootstrap)
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            batch = max(1, self.rate // 10)
            while self.sent < self.total:
                started = time.monotonic()
                for _ in range(min(batch, self.total - self.sent)):
                    words = [
                        self.rng.choice(self.VOCABULARY) for _ in range(self.rng.randint(1, 5))
                    ]
                    value = json.dumps({"line": " ".join(words)}).encode()
                    _produce(self.producer, self.topic, value, str(self.sent).encode())
                    self.sent += 1
                self.producer.poll(0)
                time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
            while self.producer.flush(10):
                pass
        except BaseException as error:  # noqa: BLE001 - reported by the run
            self.error = error


class EventsFeeder(threading.Thread):
    """Windowed events through an injector: `windows` one-second windows of event time, one
    every `interval` s of wall time, each committed with the promise that closes it. A failed
    transaction (the broker went away) is aborted and the window sent again by a new
    injector, which fences the old one's transactional id."""

    def __init__(
        self, pipeline, bootstrap: str, base: int, windows: int, per_window: int,
        interval: float, seed: int, kafka: dict,
    ) -> None:  # fmt: skip
        super().__init__(daemon=True, name="events-feeder")
        self.pipeline, self.bootstrap, self.base = pipeline, bootstrap, base
        self.windows, self.per_window, self.interval = windows, per_window, interval
        self.rng = random.Random(seed + 1)
        self.stream = next(iter(pipeline.sources))
        self.kafka = kafka
        self.done_windows = 0
        self.retries = 0
        self.error: BaseException | None = None
        self.finished = threading.Event()

    def run(self) -> None:
        injector = None
        try:
            for w in range(self.windows):
                started = time.monotonic()
                start = self.base + w * WINDOW
                batch = [
                    (self.rng.choice(QUERIES), start + self.rng.randrange(WINDOW))
                    for _ in range(self.rng.randint(self.per_window // 2, self.per_window * 3 // 2))
                ]
                injector = self._commit(injector, batch, start + WINDOW)
                self.done_windows = w + 1
                time.sleep(max(0.0, self.interval - (time.monotonic() - started)))
            injector = self._commit(injector, [], self.base + self.windows * WINDOW)
            injector.close()
        except BaseException as error:  # noqa: BLE001 - reported by the run
            self.error = error
        finally:
            self.finished.set()

    def _commit(self, injector, batch: list, watermark: int):
        while True:
            try:
                if injector is None:
                    injector = Injector(
                        self.pipeline, "feeder", bootstrap=self.bootstrap, kafka=self.kafka
                    )
                for query, ts in batch:
                    injector.send(self.stream, {"query": query}, key=None, timestamp=ts)
                injector.advance(watermark)
                return injector
            except Exception as error:  # noqa: BLE001 - the broker is down or came back
                self.retries += 1
                log.info("events feeder: %s; sending the window again", error)
                injector = None  # the next one's init_transactions aborts what this left open
                time.sleep(0.5)
