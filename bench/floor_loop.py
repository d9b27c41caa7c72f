"""The floor a logwheel stage is measured against: CountWords' per-record work written by hand
on confluent-kafka, with none of the framework, run as its own process like `logwheel run`,
until SIGTERM.

It does, per record, what logwheel's count stage must do for its guarantees, and no more:
decode the key and the JSON value; name the record by topic/partition/offset; count the word in
a dict; encode the word's state document (logwheel seals it per hook call, invariant 7); derive
the output's id (logwheel's `production_id`) and write the Avro (single-object) output with it
in a header; note each delivered offset (what logwheel's marks carry). Per commit, exactly
as logwheel's runner paces it (when the input is drained, else once a second): the changed
documents to a changelog, the input positions into the transaction, commit.

What it leaves out makes it a floor, not a replacement: restoring state, watermarks and their
marks, timers, error handling, dead letters, rebalancing. The gap between logwheel's CPU per
record and this loop's is what the framework itself costs; the gap between this loop and
bench/bare_loop.py is what the work costs.

    python bench/floor_loop.py --bootstrap H:P --input TOPIC --output TOPIC --group GROUP
                               --changelog TOPIC
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from confluent_kafka import Consumer, KafkaError, Message, Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bare_loop import BATCH, arguments, stop_on_signals  # noqa: E402
from framework.core.context import production_id  # noqa: E402
from framework.kafka.collector import ID_HEADER  # noqa: E402
from framework.kafka.config import consumer_config, producer_config  # noqa: E402
from framework.serde.catalogue import encoder_for  # noqa: E402
from framework.streaming.membership import DEFAULT_COMMIT_INTERVAL_MS  # noqa: E402


def run(bootstrap: str, source: str, target: str, changelog: str, group: str) -> int:
    """Count words from `source` into `target` until SIGTERM or SIGINT; returns how many
    records it counted."""
    stopped = stop_on_signals()
    written: dict[tuple[str, int], int] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            written[(msg.topic(), msg.partition())] = msg.offset()

    consumer = Consumer(consumer_config(bootstrap, group=group))
    config = producer_config(bootstrap, transactional_id=f"{group}-floor")
    producer = Producer({**config, "on_delivery": delivered})
    producer.init_transactions()
    producer.begin_transaction()
    consumer.subscribe([source])
    encode = encoder_for("wordcount.WordCount")
    produce, interval = producer.produce, DEFAULT_COMMIT_INTERVAL_MS / 1000
    documents: dict[str, dict] = {}
    sealed: dict[tuple[str, int], bytes] = {}  # (word, partition) -> its document, to commit
    counted, last_commit = 0, time.monotonic()
    try:
        while not stopped():
            msgs = consumer.consume(BATCH, 0.1)
            for msg in msgs:
                if msg.error() is not None:
                    continue
                key = msg.key()
                word = key.decode()
                orjson.loads(msg.value())  # CountWords reads only the key; logwheel decodes it
                partition, timestamp = msg.partition(), msg.timestamp()[1]
                cause = f"{source}/{partition}/{msg.offset()}"
                doc = documents.get(word)
                if doc is None:
                    doc = documents[word] = {}
                count = doc.get("count", 0) + 1
                doc["count"] = count
                sealed[(word, partition)] = orjson.dumps(doc)
                rid = production_id("count-words", cause, 0)
                payload = encode({"word": word, "count": count})
                headers = [(ID_HEADER, rid.encode())]
                produce(target, payload, key, -1, None, None, timestamp, headers)
                counted += 1
            producer.poll(0)
            drained = len(msgs) < BATCH
            if (sealed or msgs) and (drained or time.monotonic() - last_commit >= interval):
                for (word, partition), raw in sealed.items():
                    produce(changelog, raw, word.encode(), partition)
                sealed.clear()
                positions = consumer.position(consumer.assignment())
                if positions:
                    metadata = consumer.consumer_group_metadata()
                    producer.send_offsets_to_transaction(positions, metadata)
                producer.commit_transaction()
                producer.begin_transaction()
                last_commit = time.monotonic()
    finally:
        producer.abort_transaction()
        consumer.close()
    return counted


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv, __doc__, "changelog")
    counted = run(args.bootstrap, args.input, args.output, args.changelog, args.group)
    print(f"floor_loop: counted {counted} records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
