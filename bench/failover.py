"""Failover: from SIGKILL of a partition's owner to the first output of its new owner, with
a count-words state of `keys` distinct keys, with and without a standby replica on the
instance that takes over (`logwheel run --standby`), and how many journal records that
instance restored.

Two instances run count-words over a pre-filled topic of distinct words; once both hold
two partitions and the input is counted, the first is SIGKILLed and one new word per
partition is produced. The survivor takes the partitions over when the killed static member's
session ends (10 s, `session.timeout.ms`), restores their stores (only the tail with a
standby), and counts the new words. `restore s` is the longest of its tasks' restores, and
records/s the records restored over it (the tasks restore together, through one consumer).

Before the figures are shown every run is checked (bench/verify.py): once both instances have
stopped, the output topic is read to its end (read_committed) and must hold, exactly once
each, one count of 1 for every word and every probe written: the SIGKILLed owner's open
transaction aborted, its partitions' input counted once by the new owner. A word `missing`,
`unexpected` or `duplicated` fails the benchmark (exit 1).

    python bench/failover.py [--keys N] [--quick] [--bootstrap H:P]
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from bench import common, throughput, verify  # noqa: E402
from framework.kafka.config import producer_config  # noqa: E402
from framework.kafka.topic_ends import watermark_offsets  # noqa: E402
from tests.support import Job, wait_for  # noqa: E402

QUICK_ARGS = ["--quick"]
RESTORED = re.compile(r"restored (\d+) journal records in ([\d.]+)s")
COUNT_TIMEOUT_S = 900.0  # a liveness bound: a million words are counted in about a minute
PROBES = 40  # new words after the kill: some land on the killed owner's partitions


def produce(bootstrap: str, topic: str, words: Sequence[str]) -> None:
    """Each word once (an idempotent producer, the murmur2 partitioner: as logwheel's)."""
    producer = Producer(producer_config(bootstrap))
    for w in words:
        while True:
            try:
                producer.produce(topic, b'{"word": "%s"}' % w.encode(), w.encode())
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def _tail(bootstrap: str, topic: str) -> Consumer:
    """A read_committed consumer of what `topic` gets from now on."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "failover",
            "isolation.level": "read_committed",
        }
    )
    ends = [watermark_offsets(consumer, TopicPartition(topic, p))[1] for p in range(4)]
    consumer.assign([TopicPartition(topic, p, end) for p, end in enumerate(ends)])
    return consumer


def owned(log: str) -> set[int]:
    parts: set[int] = set()
    for line in log.splitlines():
        found = {int(p) for p in re.findall(r"words\[(\d+)\]", line)}
        parts = (
            parts | found if "assigned" in line else parts - found if "gave up" in line else parts
        )
    return parts


def run(args, standby: int) -> dict:
    with common.Workspace(args.bootstrap, "failover", args.keep) as ws:
        words, counts = f"{ws.run}-words", f"{ws.run}-counts"
        pipeline = ws.pipeline(
            "bench.throughput:count_words", ws.run, words, counts, "exactly_once"
        )
        keys = [f"k{i}" for i in range(args.keys)]
        probes = [f"p{i}" for i in range(PROBES)]
        produce(args.bootstrap, words, keys)
        ref = f"{pipeline.name.replace('-', '_')}:pipeline"
        a, b = (
            Job(ref, bootstrap=args.bootstrap, state_dir=ws.dir / name, path=ws.dir)
            for name in ("a", "b")
        )
        b.args += ["--standby", str(standby)]
        outputs = throughput.Outputs(args.bootstrap, counts)
        a.start()
        try:
            outputs.wait(args.keys, COUNT_TIMEOUT_S, lambda: common.check(a))
            b.start()
            wait_for(lambda: len(owned(b.output())) == 2 and len(owned(a.output())) == 2, 120)
            time.sleep(3)  # the standbys read the last commits
            theirs = owned(a.output())
            restored_before = len(RESTORED.findall(b.output()))
            a.kill()
            t0 = time.monotonic()
            new = _tail(args.bootstrap, counts)
            produce(args.bootstrap, words, probes)

            def taken_over() -> bool:
                return any(
                    m.error() is None and m.partition() in theirs and m.key().decode() in probes
                    for m in new.consume(100, 0.2)
                )

            wait_for(taken_over, 120, interval=0, what="the new owner's first output")
            new.close()
            seconds = time.monotonic() - t0
            outputs.wait(args.keys + PROBES, 120, lambda: common.check(b), fail=False)
            done = RESTORED.findall(b.output())[restored_before:]
            restored = sum(int(n) for n, _ in done)
            restore_s = max((float(s) for _, s in done), default=0.0)
        finally:
            a.stop()
            b.stop()
            outputs.close()
        written = verify.read(args.bootstrap, [counts], throughput.word_count)
    check = verify.compare({(w, w, 1) for w in keys + probes}, written)
    return {
        "contender": f"standby {standby}",
        "keys": args.keys,
        "failover_s": round(seconds, 1),  # SIGKILL until the new owner's first output
        "restored": restored,  # journal records the new owner restored
        "restore_s": round(restore_s, 1),
        "records_per_s": round(restored / restore_s) if restore_s else None,
        **check,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(__doc__.splitlines()[0], {"keys": 1_000_000}, {"keys": 20_000})
    args = parser.parse(argv)
    if args.quick:  # make test: side by side (each waits out a session); figures: make bench
        with ThreadPoolExecutor(max_workers=2) as pool:
            rows = list(pool.map(lambda standby: run(args, standby), (3, 0)))
    else:
        rows = [run(args, 3), run(args, 0)]
    failed = verify.failures(rows)
    if not failed:
        columns = [("run", 10), ("keys", 9), ("failover s", 11), ("restored", 9)]
        columns += [("restore s", 10), ("records/s", 10)]
        fields = ("contender", "keys", "failover_s", "restored", "restore_s", "records_per_s")
        print(common.table(columns, [[r[k] for k in fields] for r in rows]))
    common.write_results("failover", args, rows=rows, failed=failed)
    return verify.report(failed)


if __name__ == "__main__":
    sys.exit(main())
