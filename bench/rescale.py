"""The cost of `logwheel rescale`: a computation with `--keys` keys, each with its state and
one pending event-time timer (and, with `--pending N`, N records waiting in its `.by-key`
topic), rescaled from `--from` to `--to` partitions on `--master` (default local[2]).

The topics are filled directly (a producer writes each key's changelog and timer journal
records to its partition, as a task would have), then the rescale runs in this process, Spark
session start included; it prints the rescale's own lines (the two verifications among them)
and the seconds it took. One run, no warm-up.

    python bench/rescale.py [--keys 1000000] [--from 4] [--to 8] [--pending 0]
                            [--master local[2]] [--bootstrap H:P]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Producer  # noqa: E402

from framework import Computation, Pipeline, key_by  # noqa: E402
from framework.broker.bootstrap import bootstrap_from  # noqa: E402
from framework.core.api import Timer  # noqa: E402
from framework.core.timers import encode_timer, timer_key  # noqa: E402
from framework.kafka.config import producer_config  # noqa: E402
from framework.kafka.partitioning import key_partition  # noqa: E402
from framework.kafka.topics import create_topics  # noqa: E402
from framework.rescale.command import rescale  # noqa: E402

T0 = 1_700_000_000_000


class Count(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1


def fill(bootstrap: str, pipeline: Pipeline, keys: int, pending: int) -> None:
    spec = pipeline["count"]
    producer = Producer(producer_config(bootstrap))
    by_key = spec.by_key(spec.inputs[0].stream)

    def send(topic: str, key: bytes, value: bytes, partition: int, ts: int) -> None:
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, timestamp=ts)
                return
            except BufferError:
                producer.poll(0.1)

    for i in range(keys):
        key = f"key-{i}"
        p = key_partition(key, spec.partitions)
        send(spec.changelog, key.encode(), json.dumps({"n": i % 100}).encode(), p, T0 + i)
        timer = encode_timer(key, "flush", Timer(T0 + i + 60_000, "flush"))
        send(spec.timers, timer_key(key, "flush"), timer, p, T0 + i)
    for i in range(pending):
        key = f"key-{i % keys}"
        value = json.dumps({"k": key, "i": i}).encode()
        send(by_key, key.encode(), value, key_partition(key, spec.partitions), T0 + keys + i)
    if producer.flush(300):
        raise SystemExit("could not write the topics")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--from", dest="start", type=int, default=4)
    parser.add_argument("--to", type=int, default=8)
    parser.add_argument("--pending", type=int, default=0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()
    bootstrap = bootstrap_from(args.bootstrap)
    name = f"bench-rescale-{uuid.uuid4().hex[:8]}"
    pipeline = Pipeline(name, partitions=args.start)
    pipeline.source(f"{name}-in")
    pipeline.computation("count", Count, inputs={f"{name}-in": key_by("k")})
    create_topics(bootstrap, pipeline)
    started = time.monotonic()
    fill(bootstrap, pipeline, args.keys, args.pending)
    print(f"filled {args.keys:,} keys in {time.monotonic() - started:.1f} s", flush=True)
    started = time.monotonic()
    rescale(pipeline, "count", args.to, bootstrap=bootstrap, master=args.master,
            report=lambda line: print(line, flush=True))  # fmt: skip
    seconds = time.monotonic() - started
    print(f"rescale {args.keys:,} keys (state and a timer each, {args.pending:,} pending) "
          f"{args.start} -> {args.to} partitions on {args.master}: {seconds:.1f} s "
          "(Spark session start included)")  # fmt: skip


if __name__ == "__main__":
    main()
