"""Where each instance of a computation serves queries: the compacted topic
`<pipeline>.<computation>.serving`, one record per instance (key: its instance id, value: a
`logwheel.ServingAddress`), written by the instance when it starts serving.

It is read with the group's membership (framework/query/routing.py): the group says which live
instance owns a partition, this topic where that instance answers. An instance that died
leaves its record behind, harmless: no live member names it. Only the computation's principal
may write under its prefix (`logwheel acls`); a record that does not decode, or names no
http(s) URL, is skipped and counted, never followed.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.clock import now_ms
from framework.core.dead_letters import undecodable
from framework.core.part import reader_group, serving_topic
from framework.errors import ForgedRecord
from framework.kafka.config import client_config, consumer_config, producer_config
from framework.kafka.errors import Unreachable
from framework.kafka.topic_ends import Ends, read_to_end
from framework.kafka.topics import COMPACT, TopicSpec, ensure_topics
from framework.serde.catalogue import decoder_for, encoder_for

SCHEMA = "logwheel.ServingAddress"
_encode = encoder_for(SCHEMA)
_decode = decoder_for(SCHEMA)
READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Address:
    """One instance's entry: where it answers, and what a router needs to place keys."""

    instance: str
    url: str
    standby: int
    keyed_topic: str
    partitions: int


def publish(bootstrap: str, kafka: dict, group: str, address: Address) -> None:
    """Write `address` for its instance (creating the topic if it is missing)."""
    topic = serving_topic(group)
    admin = AdminClient(client_config(bootstrap, kafka))
    ensure_topics(admin, [TopicSpec(topic, 1, dict(COMPACT), "serving", True)])
    producer = Producer(producer_config(bootstrap, extra=kafka))
    value = {
        "instance": address.instance,
        "url": address.url,
        "standby": address.standby,
        "keyed_topic": address.keyed_topic,
        "partitions": address.partitions,
        "started_at": now_ms(),
    }
    producer.produce(topic, _encode(value), address.instance.encode(), partition=0)
    if producer.flush(30):
        raise Unreachable(f"publishing where {address.instance} serves to {topic}: no answer")


def read_directory(bootstrap: str, kafka: dict, group: str) -> dict[str, Address]:
    """Every instance's latest entry, read to the topic's end ({} while it does not exist)."""
    topic = serving_topic(group)
    consumer = Consumer(consumer_config(bootstrap, reader=reader_group(group), extra=kafka))
    found: dict[str, Address] = {}
    try:
        meta = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return found
        ends = Ends(consumer)
        ends.add([(topic, 0)])
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

        def apply(msgs: list) -> None:
            for msg in msgs:
                key = (msg.key() or b"").decode(errors="replace")
                if msg.value() is None:
                    found.pop(key, None)
                elif (address := _decoded(topic, msg.value())) is not None:
                    found[address.instance] = address

        read_to_end(ends, apply, timeout=READ_TIMEOUT_S)
    finally:
        consumer.close()
    return found


def _decoded(topic: str, raw: bytes) -> Address | None:
    try:
        value = _decode(raw)
        url = urllib.parse.urlsplit(value["url"])
        port = url.port
    except Exception as error:  # noqa: BLE001 - a forged or foreign record: skipped, counted
        undecodable(topic, error)
        return None
    if url.scheme not in ("http", "https") or not url.hostname or port is None:
        undecodable(
            topic, ForgedRecord("serving", f"not an http(s)://HOST:PORT URL: {value['url']!r}")
        )
        return None
    if value["partitions"] < 1 or value["standby"] < 0:
        undecodable(topic, ForgedRecord("serving", "partitions < 1 or standby < 0"))
        return None
    base = f"{url.scheme}://{url.netloc}"
    return Address(
        value["instance"], base, value["standby"], value["keyed_topic"], value["partitions"]
    )
