"""The floor of bench/sink.py: what a user writes by hand to put a topic into PostgreSQL — a
plain confluent-kafka consumer and psycopg, at least once (each batch COPYed and committed in
the database, then the group's offsets committed: a crash between the two repeats the batch).
It knows its columns in advance and does nothing else, so it is the least a sink can cost.

    python bench/sink_floor.py --bootstrap H:P --topic T --group G --dsn DSN --table TABLE

Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

import psycopg
from confluent_kafka import Consumer
from psycopg import sql

BATCH = 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option in ("--bootstrap", "--topic", "--group", "--dsn", "--table"):
        parser.add_argument(option, required=True)
    args = parser.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([args.topic])
    copy = sql.SQL("COPY {} (order_id, amount, customer, logwheel_id) FROM STDIN").format(
        sql.Identifier(args.table)
    )
    with psycopg.connect(args.dsn) as conn:
        while not stop:
            msgs = [m for m in consumer.consume(BATCH, 0.2) if m.error() is None]
            if not msgs:
                continue
            with conn.cursor() as cur, cur.copy(copy) as out:
                for m in msgs:
                    v = json.loads(m.value())
                    out.write_row(
                        (v["order_id"], v["amount"], v["customer"], f"{m.partition()}/{m.offset()}")
                    )
            conn.commit()
            consumer.commit(asynchronous=False)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
