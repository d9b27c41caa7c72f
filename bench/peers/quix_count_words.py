"""CountWords in Quix Streams, run by bench/throughput.py inside the Quix virtualenv that
bench/peers.py creates (it imports nothing of logwheel's).

The same work as logwheel's CountWords stage: read JSON {"word": w} keyed by the word, count
per key in Quix's RocksDB state, write one JSON {"word", "count"} per input record, keyed by
the word. Configured as Quix's docs recommend for each guarantee: `processing_guarantee`
"exactly-once" (transactions, read_committed) or "at-least-once" (the default), defaults
otherwise; read_committed is set for both so the gated input of the benchmark stays invisible
until it is committed (Quix's at-least-once consumer would otherwise read it early).

    python quix_count_words.py --bootstrap H:P --input T --output T --group G --state-dir D \
        --guarantee exactly-once|at-least-once
"""

from __future__ import annotations

from quix_app import application
from quixstreams import State


def count(value: dict, state: State) -> dict:
    n = state.get("count", 0) + 1
    state.set("count", n)
    return {"word": value["word"], "count": n}


def main() -> None:
    app, args = application(__doc__)
    words = app.topic(args.input, value_deserializer="json", key_deserializer="str")
    counts = app.topic(args.output, value_serializer="json", key_serializer="str")
    app.dataframe(words).apply(count, stateful=True).to_topic(counts)
    app.run()  # until SIGTERM or SIGINT


if __name__ == "__main__":
    main()
