"""One Spark task of a rescale's write (framework/rescale/writer.py), run on Arrow batches of view
rows with a stand-in producer: each row to its kind's topic in the partition Kafka's producer
gives its key, with its event time and headers; the ids of each old segment regrouped per new
partition; one transaction, committed with each partition's count and last offset, or aborted
and retried. Spark's own part (repartitioning, mapInArrow) runs in
tests/integration/test_rescale.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from framework.core.dedup import decode_segment
from framework.errors import Retry
from framework.kafka.partitioning import bytes_partition
from framework.rescale import writer
from framework.rescale.views import ID, PENDING, STATE, TIMER, Topics
from tests.unit.kafka.fakes import FakeProducer

TARGETS = Topics("rs.c.changelog", "rs.c.timers", "rs.c.ids", {"clicks": "rs.c.clicks.by-key"})
PARTITIONS = 4
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema([
    ("kind", pa.string()), ("key", pa.string()), ("place", pa.binary()), ("stream", pa.string()),
    ("partition", pa.int32()), ("seq", pa.int64()), ("kafka_key", pa.binary()),
    ("value", pa.binary()), ("headers", HEADERS), ("ts", pa.int64()), ("segment", pa.binary()),
    ("start", pa.int64()),
])  # fmt: skip


class TransactionalProducer(FakeProducer):
    """The kafka stand-in with the transaction calls a rescale task makes, in `log`; each one
    made starts with `full_at_start` sends meeting a full queue and refusing `refusing`."""

    made: list[TransactionalProducer] = []
    full_at_start = 0
    refusing: dict = {}

    def __init__(self, config: dict) -> None:
        super().__init__(config)
        self.config, self.log = config, []
        self.full, self.refuse = self.full_at_start, dict(self.refusing)
        TransactionalProducer.made.append(self)

    def init_transactions(self, timeout):
        self.log.append("init")

    def begin_transaction(self):
        self.log.append("begin")

    def commit_transaction(self, timeout):
        self.log.append("commit")

    def abort_transaction(self, timeout):
        self.log.append("abort")

    def __len__(self) -> int:
        return len(self.queued)


@pytest.fixture
def producers(monkeypatch):
    monkeypatch.setattr("confluent_kafka.Producer", TransactionalProducer)
    TransactionalProducer.made = []
    return TransactionalProducer.made


def row(kind: str, key: str, **fields) -> dict:
    out = dict.fromkeys(SCHEMA.names)
    out.update(kind=kind, key=key, place=key.encode(), kafka_key=key.encode(), value=b"v", ts=5)
    return {**out, **fields}


def run(*rows: dict) -> list[dict]:
    batches = [pa.RecordBatch.from_pylist(list(rows), schema=SCHEMA)]
    [result] = writer._task(iter(batches), TARGETS, PARTITIONS, {"b": 1}, "rs.c.rescale")
    return result.to_pylist()


def key_in(partition: int, but: str = "") -> str:
    keys = (f"k{i}" for i in range(1000) if f"k{i}" != but)
    return next(k for k in keys if bytes_partition(k.encode(), PARTITIONS) == partition)


def test_each_row_goes_to_its_kinds_topic_in_the_partition_kafka_gives_its_key(producers):
    timer_key = b'["ann", "close"]'
    headers = [{"key": "logwheel.id", "value": b"i1"}]
    run(
        row(STATE, "ann", value=b"state", ts=-1),
        row(TIMER, "ann", kafka_key=timer_key, value=b"timer"),
        row(PENDING, "bob", stream="clicks", value=b"click", ts=1234, headers=headers),
    )
    ann, bob = (bytes_partition(k, PARTITIONS) for k in (b"ann", b"bob"))
    assert producers[0].produced == [
        ("rs.c.changelog", b"ann", b"state", ann, 0, None),  # no event time: the producer's
        ("rs.c.timers", timer_key, b"timer", ann, 5, None),  # placed by the key, not the journal's
        ("rs.c.clicks.by-key", b"bob", b"click", bob, 1234, [("logwheel.id", b"i1")]),
    ]


def test_the_task_writes_in_one_transaction_of_its_own_and_reports_counts_and_last_offsets(
    producers,
):
    k0, k1 = key_in(0), key_in(1)
    result = run(row(STATE, k0), row(STATE, key_in(0, but=k0)), row(STATE, k1))
    [producer] = producers
    assert producer.config["transactional.id"] == "rs.c.rescale.0"  # Spark's task 0 here
    assert producer.log == ["init", "begin", "commit"]
    assert sorted((r["partition"], r["count"], r["last"]) for r in result) == [(0, 2, 1), (1, 1, 0)]
    assert {r["topic"] for r in result} == {"rs.c.changelog"}


def test_ids_are_regrouped_into_segments_by_new_partition_and_old_segment(producers, monkeypatch):
    monkeypatch.setattr(writer, "SEGMENT_IDS", 2)
    a, b, c = key_in(0), key_in(0, but=key_in(0)), key_in(3)
    old = b'[1000, "old"]'

    def id_row(key, rid, segment=old, start=1000):
        return row(ID, key, value=rid.encode(), segment=segment, start=start)

    run(id_row(a, "1"), id_row(b, "2"), id_row(a, "3"), id_row(c, "4"),
        id_row(a, "5", segment=b'[2000, "other"]', start=2000))  # fmt: skip
    segments = [(p, key, decode_segment(key, value)) for t, key, value, p, _, _ in
                producers[0].produced]  # fmt: skip
    assert all(t == "rs.c.ids" for t, *_ in producers[0].produced)
    assert [(p, s.start, s.ids) for p, _, s in segments] == [
        (0, 1000, [(a, "1"), (b, "2")]),  # at most SEGMENT_IDS ids a segment ...
        (0, 1000, [(a, "3")]),  # ... the rest in the next chunk
        (3, 1000, [(c, "4")]),
        (0, 2000, [(a, "5")]),
    ]
    assert [key for _, key, _ in segments] == [
        writer.segment_key(1000, old, 0, a, 0),
        writer.segment_key(1000, old, 0, a, 1),
        writer.segment_key(1000, old, 3, c, 0),
        writer.segment_key(2000, b'[2000, "other"]', 0, a, 0),
    ]


def test_a_full_queue_is_waited_out_and_nothing_is_lost_or_sent_twice(producers, monkeypatch):
    monkeypatch.setattr(TransactionalProducer, "full_at_start", 3)
    result = run(row(STATE, "ann"), row(STATE, "bob"))
    assert [p[1] for p in producers[0].produced] == [b"ann", b"bob"]
    assert sum(r["count"] for r in result) == 2


def test_a_failed_delivery_aborts_the_transaction_and_the_task_is_retried(producers, monkeypatch):
    from confluent_kafka import KafkaError

    refused = {"rs.c.timers": KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)}
    monkeypatch.setattr(TransactionalProducer, "refusing", refused)
    with pytest.raises(Retry, match="rescale task 0: writes failed"):
        run(row(STATE, "ann"), row(TIMER, "ann"))
    assert producers[0].log == ["init", "begin", "abort"]
