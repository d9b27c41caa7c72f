"""A transactional round trip through the embedded broker: what `make demo` shows for now.

One transaction is aborted and one committed; a read_committed consumer (as every logwheel
consumer is) sees only the committed records, a read_uncommitted one sees both.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.broker import bootstrap_from


def read(bootstrap: str, topic: str, isolation: str, expect: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"demo-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = [], time.monotonic() + 15
    while len(values) < expect and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            values.append(json.loads(message.value())["text"])
    consumer.close()
    return values


def main() -> None:
    bootstrap = bootstrap_from(None)
    topic = f"demo-roundtrip-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # log_level 3: no warning while the transaction coordinator loads at its first use
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "log_level": 3})
    began = time.monotonic()
    producer.init_transactions(30)
    for outcome in ("aborted", "committed"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, json.dumps({"text": f"{outcome}-{i}"}), key=f"k{i}")
        producer.flush(30)
        if outcome == "aborted":
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    committed = read(bootstrap, topic, "read_committed", 3)
    everything = read(bootstrap, topic, "read_uncommitted", 6)
    print(f"broker {bootstrap}, topic {topic}")
    print(
        f"  produced 2 transactions of 3 records (one aborted) in {time.monotonic() - began:.2f}s"
    )
    print(f"  read_committed sees   {committed}")
    print(f"  read_uncommitted sees {everything}")
    ok = committed == [f"committed-{i}" for i in range(3)] and len(everything) == 6
    print("round trip OK: aborted records are invisible" if ok else "round trip FAILED")
    print("(the broker keeps running: `make broker-stop` stops it)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
