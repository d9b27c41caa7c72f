"""Where each instance serves queries (framework/query/directory.py), over stand-in clients: what
an instance publishes is what the directory reads back, its latest entry winning and a tombstone
removing it; a record that does not decode or names no http(s)://HOST:PORT, or impossible
counts, is skipped and counted, never followed; a directory topic not created yet is empty."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework.core.metrics import UNDECODABLE
from framework.kafka.errors import Unreachable
from framework.query import directory
from framework.query.directory import Address, publish, read_directory
from tests.unit.kafka.fakes import FakeProducer
from tests.unit.state.fakes import FakeLog

GROUP = "shop.count"
TOPIC = "shop.count.serving"


class Cluster(FakeLog):
    """A consumer of the directory topic, made by `read_directory`; `made` its configs. As
    Kafka, it knows no offsets of a topic that does not exist."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[dict] = []

    def list_topics(self, topic, timeout=None):
        partitions = dict.fromkeys(p for t, p in self.logs if t == topic)
        meta = SimpleNamespace(error=None, partitions=partitions) if partitions else None
        return SimpleNamespace(topics={topic: meta} if meta else {})

    def assign(self, tps):
        self.incremental_assign(tps)

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        if not any(t == tp.topic for t, _ in self.logs):
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        return super().get_watermark_offsets(tp, timeout, cached)


@pytest.fixture
def cluster(monkeypatch):
    """The directory topic's log, which `publish` writes to and `read_directory` reads."""
    log, created = Cluster(), []

    class Producer(FakeProducer):
        def produce(self, topic, value=None, key=None, partition=-1, **kwargs):
            super().produce(topic, value, key, partition, **kwargs)
            log.write(topic, partition, (key, value))

    def consumer(config):
        log.made.append(config)
        log.closed = False
        return log

    monkeypatch.setattr(directory, "AdminClient", lambda config: "admin")
    monkeypatch.setattr(directory, "ensure_topics", lambda admin, specs: created.extend(specs))
    monkeypatch.setattr(directory, "Producer", Producer)
    monkeypatch.setattr(directory, "Consumer", consumer)
    log.created = created
    return log


def address(instance: str, url: str = "http://10.0.0.1:8080", **changes) -> Address:
    fields = {"standby": 1, "keyed_topic": "shop.count.clicks.by-key", "partitions": 4}
    return Address(instance, url, **{**fields, **changes})


def forged(**changes) -> bytes:
    value = {"instance": "x", "url": "http://h:1", "standby": 0, "keyed_topic": "t",
             "partitions": 1, "started_at": 0}  # fmt: skip
    return directory._encode({**value, **changes})


def test_what_an_instance_publishes_is_what_the_directory_reads_its_latest_entry_winning(cluster):
    publish("b:9092", {}, GROUP, address("pod-0", "http://10.0.0.1:8080"))
    publish("b:9092", {}, GROUP, address("pod-1", "https://pod-1.job:8443"))
    publish("b:9092", {}, GROUP, address("pod-0", "http://10.0.0.9:8080", standby=0))
    assert read_directory("b:9092", {}, GROUP) == {
        "pod-0": address("pod-0", "http://10.0.0.9:8080", standby=0),
        "pod-1": address("pod-1", "https://pod-1.job:8443"),
    }
    created = {(s.name, s.partitions, s.config["cleanup.policy"]) for s in cluster.created}
    assert created == {(TOPIC, 1, "compact")}
    assert cluster.made[0]["group.id"] == "shop.count.reader" and cluster.closed


def test_a_tombstone_removes_an_instance_and_a_url_keeps_only_its_origin(cluster):
    publish("b:9092", {}, GROUP, address("pod-0", "http://10.0.0.1:8080/state/?x=1"))
    publish("b:9092", {}, GROUP, address("pod-1"))
    cluster.write(TOPIC, 0, (b"pod-1", None))
    assert read_directory("b:9092", {}, GROUP) == {"pod-0": address("pod-0")}


@pytest.mark.parametrize(
    "raw",
    [
        b"\xffnot a record",
        forged(url="ftp://h:21"),
        forged(url="http://h"),  # no port
        forged(url="http://:80"),
        forged(url="http://h:port"),
        forged(partitions=0),
        forged(standby=-1),
    ],
    ids=["garbage", "ftp", "no-port", "no-host", "bad-port", "no-partitions", "negative-standby"],
)
def test_a_record_that_names_no_place_to_answer_is_skipped_and_counted(cluster, raw):
    counted = UNDECODABLE.labels(TOPIC)
    before = counted._value.get()
    publish("b:9092", {}, GROUP, address("pod-0"))
    cluster.write(TOPIC, 0, (b"x", raw))
    assert read_directory("b:9092", {}, GROUP) == {"pod-0": address("pod-0")}
    assert counted._value.get() == before + 1


def test_a_directory_not_created_yet_is_empty(cluster):
    assert read_directory("b:9092", {}, GROUP) == {}
    assert cluster.closed


def test_a_publication_the_cluster_does_not_take_is_unreachable(cluster, monkeypatch):
    monkeypatch.setattr(FakeProducer, "flush", lambda self, timeout=None: 1)
    with pytest.raises(Unreachable, match=rf"publishing where pod-0 serves to {TOPIC}: no answer"):
        publish("b:9092", {}, GROUP, address("pod-0"))
