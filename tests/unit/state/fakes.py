"""A stand-in for a confluent_kafka Consumer serving in-memory partition logs, for unit tests
of the readers that rebuild local stores (restore, tables). It supports only the calls those
pieces make; Kafka's own behaviour is tested against the real broker in tests/integration."""

from __future__ import annotations

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

Record = tuple[bytes, bytes | None] | tuple[bytes | None, bytes | None, int]


class FakeLog:
    """Partition logs (topic, partition) -> [(key, value or None[, timestamp])], offsets from
    0 (timestamp 0 if not given); `served` counts the records `consume` has handed out."""

    def __init__(self, logs: dict[tuple[str, int], list[Record]] | None = None) -> None:
        self.logs = logs if logs is not None else {}
        self.positions: dict[tuple[str, int], int] = {}
        self.served = 0
        self.closed = False

    def write(self, topic: str, partition: int, *records: Record) -> None:
        self.logs.setdefault((topic, partition), []).extend(records)

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return (0, len(self.logs.get((tp.topic, tp.partition), [])))

    def incremental_assign(self, tps):
        for tp in tps:
            offset = 0 if tp.offset == OFFSET_BEGINNING else tp.offset
            self.positions[(tp.topic, tp.partition)] = offset

    def incremental_unassign(self, tps):
        """As librdkafka does, refuses partitions that are not assigned."""
        if any((tp.topic, tp.partition) not in self.positions for tp in tps):
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "not assigned"))
        for tp in tps:
            self.positions.pop((tp.topic, tp.partition))

    def consume(self, num_messages=1, timeout=-1):
        out = []
        for (topic, partition), position in self.positions.items():
            log = self.logs.get((topic, partition), [])
            end = min(len(log), position + num_messages - len(out))
            out += [
                Message(
                    topic=topic,
                    partition=partition,
                    offset=o,
                    key=log[o][0],
                    value=log[o][1],
                    timestamp=(1, log[o][2] if len(log[o]) > 2 else 0),
                )
                for o in range(position, end)
            ]
            self.positions[(topic, partition)] = max(position, end)
        self.served += len(out)
        return out

    def position(self, tps):
        return [
            TopicPartition(
                tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), OFFSET_INVALID)
            )
            for tp in tps
        ]

    def close(self):
        self.closed = True
