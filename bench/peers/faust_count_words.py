"""CountWords in Faust (faust-streaming), run by bench/throughput.py inside the Faust virtualenv
that bench/peers.py creates (it imports nothing of logwheel's).

The same work as logwheel's CountWords stage: read JSON {"word": w} keyed by the word, count
per key in a Faust table (RocksDB, changelogged, as Faust's docs recommend for production:
store="rocksdb://", here through rocksdict, faust-streaming's maintained binding), write one
JSON {"word", "count"} per input record keyed by the word. processing_guarantee
"at_least_once" (Faust's default), defaults otherwise, but for the one setting the benchmark's
gate needs: the consumer reads read_committed (Faust sets it only under exactly_once, and has no
setting for it), so the gated input stays invisible until it is committed, as for every other
contender. That changes what is read when, not how fast.

    python faust_count_words.py --bootstrap H:P --input T --output T --group G --state-dir D \
        --guarantee at_least_once
"""

from __future__ import annotations

import argparse
import logging
import sys

import aiokafka
import faust

_consumer_init = aiokafka.AIOKafkaConsumer.__init__


def _read_committed(self, *args, **kwargs) -> None:
    kwargs["isolation_level"] = "read_committed"
    _consumer_init(self, *args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("bootstrap", "input", "output", "group", "state-dir", "guarantee"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args()
    aiokafka.AIOKafkaConsumer.__init__ = _read_committed
    app = faust.App(
        args.group,
        broker=f"kafka://{args.bootstrap}",
        store="rocksdb://",
        datadir=args.state_dir,
        processing_guarantee=args.guarantee,
        consumer_auto_offset_reset="earliest",
        table_rocksdb_options={"use_rocksdict": True},
        topic_partitions=4,
        web_enabled=False,
    )
    words = app.topic(args.input, key_serializer="raw", value_serializer="json")
    counts_out = app.topic(args.output, key_serializer="raw", value_serializer="json")
    counts = app.Table("counts", default=int, partitions=4)

    @app.agent(words)
    async def count(stream):
        async for event in stream.events():
            word = event.key
            counts[word] += 1
            value = {"word": event.value["word"], "count": counts[word]}
            await counts_out.send(key=word, value=value)

    logging.getLogger("faust").setLevel(logging.WARNING)
    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()  # until SIGTERM


if __name__ == "__main__":
    main()
