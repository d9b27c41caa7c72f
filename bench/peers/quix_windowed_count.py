"""bench/windowed.py's tumbling count in Quix Streams, run inside the Quix virtualenv that
bench/peers.py creates (it imports nothing of logwheel's).

The same work as logwheel's `pipeline.windowed(..., window=windows.Tumbling(size_ms=60_000),
aggregate=windows.Count(), emit="final")`: read JSON records keyed by the Kafka key, count
them per key in tumbling 60 s windows of event time (the Kafka timestamp) in Quix's RocksDB
windowed state, grace 0, and write each window once, when it closes, as JSON
{"start", "end", "value"} keyed by the key (Quix's own result shape). `--closing key` (Quix's
default) closes a key's windows when that key's own records pass their end; `--closing
partition` when any record of the partition does (stream time, as a watermark does).
Configured as Quix's docs recommend (processing_guarantee; defaults otherwise, its 5 s commit
interval included), read_committed input as for logwheel.

    python quix_windowed_count.py --bootstrap H:P --input T --output T --group G \
        --state-dir D --guarantee exactly-once|at-least-once [--closing key|partition]
"""

from __future__ import annotations

from quix_app import application

SIZE_MS = 60_000


def main() -> None:
    app, args = application(__doc__, closing="key")
    events = app.topic(args.input, value_deserializer="json", key_deserializer="str")
    counts = app.topic(args.output, value_serializer="json", key_serializer="str")
    window = app.dataframe(events).tumbling_window(duration_ms=SIZE_MS, name="counts").count()
    window.final(closing_strategy=args.closing).to_topic(counts)
    app.run()  # until SIGTERM or SIGINT


if __name__ == "__main__":
    main()
