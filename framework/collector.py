"""Everything a process writes goes through one producer, and this records where it landed.

The offsets are what watermark marks carry (invariant 4) and what local checkpoints record.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

ID_HEADER = "logwheel.id"
ERROR_HEADERS = (
    "logwheel.error",
    "logwheel.error.stage",
    "logwheel.source.topic",
    "logwheel.source.partition",
    "logwheel.source.offset",
)


class Collector:
    """A producer plus the last offset it wrote to each topic-partition."""

    def __init__(self, config: dict) -> None:
        self.written: dict[tuple[str, int], int] = {}
        self._errors: list[KafkaError] = []
        self.producer = Producer({**config, "on_delivery": self._delivered})

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._errors.append(err)
            return
        key = (msg.topic(), msg.partition())
        if msg.offset() > self.written.get(key, -1):
            self.written[key] = msg.offset()

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
        kwargs = {} if partition is None else {"partition": partition}
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        while True:
            try:
                self.producer.produce(topic, value, key, headers=headers, **kwargs)
                return
            except BufferError:
                self.producer.poll(0.05)

    def dead_letter(
        self,
        dlq: str,
        msg: Message | None,
        error: BaseException | str,
        stage: str,
        fallback: tuple[bytes | None, bytes | None, int] = (None, None, 0),
    ) -> None:
        """Send the original bytes to the dead-letter topic with the reason in headers."""
        reason = error if isinstance(error, str) else _describe(error)
        if msg is not None:
            key, value, timestamp = msg.key(), msg.value(), msg.timestamp()[1]
            source = (msg.topic(), str(msg.partition()), str(msg.offset()))
            headers = list(msg.headers() or [])
        else:
            key, value, timestamp = fallback
            source = ("", "", "")
            headers = []
        headers += list(zip(ERROR_HEADERS, (reason, stage, *source), strict=True))
        self.send(dlq, key, value, timestamp=timestamp or None, headers=headers)

    def flush(self) -> None:
        """Wait for every send; raise the first delivery error."""
        self.producer.flush()
        if self._errors:
            err, self._errors = self._errors[0], []
            raise KafkaException(err)

    def remember(self, offsets: Iterable[tuple[tuple[str, int], int]]) -> None:
        """Take over offsets a previous owner wrote, so marks never claim less than it did."""
        for key, offset in offsets:
            if offset > self.written.get(key, -1):
                self.written[key] = offset


def _describe(error: BaseException) -> str:
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
    return f"{type(error).__name__}: {error}{where}"
