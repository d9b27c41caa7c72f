"""bench/latency.py's bucket-sort stage in Quix Streams, run inside the Quix virtualenv that
bench/peers.py creates (it imports nothing of logwheel's).

The same work as logwheel's BucketSort: read JSON {"seq", "n", "bucket", "sent_us"} keyed by
the sequence number, re-key by bucket (`group_by`, Quix's repartition through a topic of its
own, as logwheel's key_by goes through `.by-key`), keep per bucket the 32 smallest numbers seen
in state, and write one JSON {"seq", "sent_us", "n", "rank"} per input. Configured as Quix's
docs recommend (processing_guarantee; its default 5 s commit interval), read_committed input
as for logwheel.

    python quix_bucket_sort.py --bootstrap H:P --input T --output T --group G --state-dir D \
        --guarantee exactly-once|at-least-once
"""

from __future__ import annotations

import bisect

from quix_app import application
from quixstreams import State

KEEP = 32


def bucket_sort(value: dict, state: State) -> dict:
    numbers = list(state.get("numbers", []))
    rank = bisect.bisect_left(numbers, value["n"])
    numbers.insert(rank, value["n"])
    state.set("numbers", numbers[:KEEP])
    return {"seq": value["seq"], "sent_us": value["sent_us"], "n": value["n"], "rank": rank}


def main() -> None:
    app, args = application(__doc__)
    numbers = app.topic(args.input, value_deserializer="json", key_deserializer="str")
    sorted_ = app.topic(args.output, value_serializer="json", key_serializer="str")
    sdf = app.dataframe(numbers).group_by(lambda value: str(value["bucket"]), name="bucket")
    sdf.apply(bucket_sort, stateful=True).to_topic(sorted_)
    app.run()  # until SIGTERM or SIGINT


if __name__ == "__main__":
    main()
