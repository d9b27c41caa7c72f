"""bench/join.py's interval join in Quix Streams, run inside the Quix virtualenv that
bench/peers.py creates (it imports nothing of logwheel's).

`StreamingDataFrame.join_interval` of orders (`--input`, left) and payments (`--right`) by the
Kafka key: a right record at t_r meets a left one at t_l when t_l - backward_ms <= t_r <= t_l +
forward_ms (`--before-ms`, `--after-ms`), both edges inclusive, as logwheel's before_ms and
after_ms. Its state: both sides' records in Quix's timestamped RocksDB stores (changelogged),
each key's records kept for `grace_ms` of event time behind its newest (here after_ms +
`--grace-ms`, the longest a record can wait for a partner). Records of both topics are consumed
in timestamp order (Quix aligns a join's inputs by time). Each result is written as JSON
{"left", "right"} keyed by the key. Only `--how inner` is measured: Quix's left and outer joins
write a record alone at once when no partner is stored yet, and the pair too if one comes later
(quixstreams/dataframe/joins/join_interval.py), which the benchmark's check refuses.
Configured as Quix's docs recommend (processing_guarantee; defaults otherwise), read_committed
input as for logwheel.

    python quix_join_interval.py --bootstrap H:P --input ORDERS --right PAYMENTS --output T \
        --group G --state-dir D --guarantee exactly-once|at-least-once --how inner \
        --before-ms B --after-ms A --grace-ms G
"""

from __future__ import annotations

from quix_app import application


def pair(left: object, right: object) -> dict:
    return {"left": left, "right": right}


def main() -> None:
    app, args = application(__doc__, right=None, how="inner", before_ms=0, after_ms=0, grace_ms=0)
    before, after, grace = int(args.before_ms), int(args.after_ms), int(args.grace_ms)
    orders = app.topic(args.input, value_deserializer="json", key_deserializer="str")
    payments = app.topic(args.right, value_deserializer="json", key_deserializer="str")
    out = app.topic(args.output, value_serializer="json", key_serializer="str")
    joined = app.dataframe(orders).join_interval(
        app.dataframe(payments),
        how=args.how,
        on_merge=pair,
        grace_ms=max(before, after) + grace,
        name="join",
        backward_ms=before,
        forward_ms=after,
    )
    joined.to_topic(out)
    app.run()  # until SIGTERM or SIGINT


if __name__ == "__main__":
    main()
