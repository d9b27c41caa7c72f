"""CPU per record of a keyed task's per-record path alone, in this process: the count-words
`KeyedTask` of bench/throughput.py fed pre-built messages in runs of 1,000 (as the membership's
`_handle_runs` hands them), its productions and changelog going to a real producer and RocksDB,
a commit's local half (changelog, flush, store) every `--commit-every` records; no consumer,
no transaction, no other process.

The minimum over `--rounds` rounds of the main thread's CPU time per record (`thread us`) and
the whole process's (`process us`, librdkafka's threads included): steadier than the end-to-end
benchmarks on a shared machine, so a change to the per-record path can be compared before and
after in a few seconds (run it on both trees, interleaved).

    python bench/hot_path.py [--records N] [--rounds R] [--commit-every N] [--bootstrap H:P]

Not run by run_all.py (it defines no QUICK_ARGS): a tool for whoever tunes the runtime.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from confluent_kafka import Message

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, throughput  # noqa: E402
from framework.core.dead_letters import ErrorPolicy  # noqa: E402
from framework.core.timers import decode_timer  # noqa: E402
from framework.kafka.collector import Collector  # noqa: E402
from framework.kafka.config import producer_config  # noqa: E402
from framework.kafka.limits import Limit, TopicLimits  # noqa: E402
from framework.kafka.output import PartIO  # noqa: E402
from framework.state.store import TaskStore  # noqa: E402
from framework.streaming.task import KeyedTask  # noqa: E402

RUN = 1_000


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(
        "per-record CPU of a keyed task", {"records": 200_000, "rounds": 10, "commit_every": 4_000}
    )
    args = parser.parse(argv)
    with common.Workspace(args.bootstrap, "hot", args.keep) as ws:
        pipeline = ws.pipeline(
            "bench.throughput:count_words",
            ws.run,
            f"{ws.run}-words",
            f"{ws.run}-out",
            "at_least_once",
        )
        spec = pipeline["count-words"]
        limits = TopicLimits({t: Limit() for t in [*spec.outputs, spec.changelog, spec.timers]})
        collector = Collector(producer_config(args.bootstrap, extra={"linger.ms": 5}), limits)
        partitions = {f"{ws.run}-words": throughput.PARTITIONS}
        io = PartIO(pipeline, spec, collector, partitions, ErrorPolicy(spec.group, "stop"))
        store = TaskStore(Path(tempfile.mkdtemp(dir=ws.dir)) / "task-0", decode_timer)
        task = KeyedTask(io, 0, store)
        inp = task.inputs[0]
        rng = random.Random(1)
        words = rng.choices(throughput.zipf_words(throughput.VOCABULARY * 10), k=args.records)
        msgs = [
            Message(topic=inp.topic, partition=0, offset=i, key=w.encode(),
                    value=orjson.dumps({"word": w}), timestamp=(1, 1_700_000_000_000 + i))
            for i, w in enumerate(words)
        ]  # fmt: skip

        def measure(batch: list[Message]) -> tuple[float, float]:
            thread, process = time.thread_time(), time.process_time()
            for i in range(0, len(batch), RUN):
                task.handle_run(batch[i : i + RUN], inp)
                collector.producer.poll(0)
                if i % args.commit_every == 0:
                    task.prepare_commit()
                    collector.flush()
                    task.committed()
            collector.flush()
            n = len(batch) / 1e6
            return (time.thread_time() - thread) / n, (time.process_time() - process) / n

        size = len(msgs) // (args.rounds + 1)
        measure(msgs[:size])  # warm-up: caches, RocksDB, the producer's connection
        rounds = [measure(msgs[size * r : size * (r + 1)]) for r in range(1, args.rounds + 1)]
        task.close()
    thread_us, process_us = min(r[0] for r in rounds), min(r[1] for r in rounds)
    print(f"thread us {thread_us:.2f}  process us {process_us:.2f}  (min of {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
