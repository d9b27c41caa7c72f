"""What an idle job costs the broker and the machine (issue 7 item 5): a two-stage wordcount
drains a few lines, then sits idle; over `--seconds` the records it adds to
`__transaction_state` and `__consumer_offsets` (end offsets summed over partitions) and the
CPU of its processes. Run it on a broker of its own: other clients' transactions count too.

    python bench/idle.py [--seconds S] [--quick] [--bootstrap H:P]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from bench import common  # noqa: E402
from framework.kafka.reading import watermark_offsets  # noqa: E402
from tests.support import Wordcount  # noqa: E402

QUICK_ARGS = ["--quick"]
INTERNAL = ("__transaction_state", "__consumer_offsets")
SETTLE_S = 10.0  # after the last count: the drained input's last commits and marks


def end_offsets(bootstrap: str) -> dict[str, int]:
    """Each internal topic's end offsets, summed over its partitions."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "logwheel-bench-idle"})
    try:
        topics = consumer.list_topics(timeout=30).topics
        return {
            name: sum(
                watermark_offsets(consumer, TopicPartition(name, p))[1]
                for p in topics[name].partitions
            )
            for name in INTERNAL
            if name in topics
        }
    finally:
        consumer.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(__doc__.splitlines()[0], {"seconds": 30}, {"seconds": 3})
    args = parser.parse(argv)
    with common.Workspace(args.bootstrap, "idle", args.keep) as ws:
        wc = Wordcount(args.bootstrap, ws.dir)
        wc.send_lines(200)
        job = wc.job().start()
        try:
            wc.read_counts()
            time.sleep(SETTLE_S)
            before, cpu0 = end_offsets(args.bootstrap), common.cpu_seconds(job.proc.pid)
            t0 = time.monotonic()
            time.sleep(args.seconds)
            seconds = time.monotonic() - t0
            after, cpu1 = end_offsets(args.bootstrap), common.cpu_seconds(job.proc.pid)
        finally:
            job.stop()
    rates = {name: (after[name] - before.get(name, 0)) / seconds for name in after}
    cpu = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / seconds
    for name, rate in rates.items():
        print(f"{name}: {rate:.2f} records/s over {seconds:.0f} s while idle")
    print("idle CPU: " + ("-" if cpu is None else f"{100 * cpu:.1f}% of a core"))
    common.write_results(
        "idle", args, seconds=seconds, records_per_s=rates, cpu_cores=cpu, settle_s=SETTLE_S
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
