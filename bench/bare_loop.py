"""The reference a logwheel stage is measured against: a bare confluent-kafka consume→produce
loop, run as its own process like `logwheel run`, until SIGTERM.

It reads the input with a read_committed group consumer and writes every record, key and value
bytes unchanged, to the output with a plain (non-transactional, non-idempotent) producer. The
clients get the same fetch and batching settings logwheel's own get (`framework.kafka.config`), so
what separates the two is the framework: decoding, the hook, state, encoding, changelog and
the commit protocol — not client tuning. Offsets are auto-committed, as a bare loop would.

    python bench/bare_loop.py --bootstrap H:P --input TOPIC --output TOPIC --group GROUP
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from framework.kafka.config import consumer_config, producer_config  # noqa: E402

BATCH = 1000  # as logwheel's Runner.max_batch


def stop_on_signals() -> Callable[[], bool]:
    """Whether SIGTERM or SIGINT came since this was called: a loop's condition to end."""
    stopped = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.append(True))
    return lambda: bool(stopped)


def arguments(argv: Sequence[str] | None, doc: str, *extra: str) -> argparse.Namespace:
    """--bootstrap, --input, --output, --group and each of `extra`, all required; the help
    says the first paragraph of `doc`."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    for name in ("bootstrap", "input", "output", "group", *extra):
        parser.add_argument(f"--{name}", required=True)
    return parser.parse_args(argv)


def run(bootstrap: str, source: str, target: str, group: str) -> int:
    """Copy `source` to `target` until SIGTERM or SIGINT; returns how many records it copied."""
    stopped = stop_on_signals()
    consumer = Consumer(
        consumer_config(
            bootstrap,
            group=group,
            extra={"enable.auto.commit": True, "enable.auto.offset.store": True},
        )
    )
    producer = Producer(producer_config(bootstrap, extra={"enable.idempotence": False}))
    consumer.subscribe([source])
    copied = 0
    try:
        while not stopped():
            msgs = consumer.consume(BATCH, 0.1)
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.fatal():
                        raise RuntimeError(f"consumer: {err}")
                    if err.code() != KafkaError._PARTITION_EOF:
                        print(f"bare_loop: consumer: {err}", file=sys.stderr)
                    continue
                while True:
                    try:
                        producer.produce(
                            target, msg.value(), msg.key(), timestamp=msg.timestamp()[1]
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                copied += 1
            producer.poll(0)
    finally:
        producer.flush(30)
        consumer.close()
    return copied


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv, __doc__)
    copied = run(args.bootstrap, args.input, args.output, args.group)
    print(f"bare_loop: copied {copied} records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
