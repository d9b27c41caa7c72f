"""Instructions per record of a keyed task's per-record path, counted by valgrind's callgrind:
the count-words `KeyedTask` of bench/throughput.py fed pre-built messages in runs of 1,000 (as
bench/hot_path.py feeds them), state in RocksDB, its productions handed to a producer that
drops them; no broker, no commit. Deterministic where CPU time on a shared machine is not, so
a change to the per-record path can be judged by one run on each tree.

The path runs twice under callgrind, over 0 and over `--records` records after the same
warm-up (20,000 records: the vocabulary loaded); the difference over `--records` is the
figure.

    python bench/instructions.py [--records N]        (valgrind on PATH; ~1 min per 10,000)

Not run by run_all.py (it defines no QUICK_ARGS): a tool for whoever tunes the runtime.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import orjson
from confluent_kafka import Message

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import throughput  # noqa: E402
from framework.core.dead_letters import ErrorPolicy  # noqa: E402
from framework.core.timers import decode_timer  # noqa: E402
from framework.kafka.collector import Collector  # noqa: E402
from framework.kafka.config import producer_config  # noqa: E402
from framework.kafka.limits import Limit, TopicLimits  # noqa: E402
from framework.kafka.output import PartIO  # noqa: E402
from framework.state.store import TaskStore  # noqa: E402
from framework.streaming.task import KeyedTask  # noqa: E402

RUN = 1_000
WARM_UP = 20_000


class Dropped:
    """A producer that drops what it is given: the path up to confluent-kafka, not librdkafka."""

    def produce(self, *args: object) -> None:
        pass

    def poll(self, *args: object) -> int:
        return 0


def path(records: int, most: int) -> None:
    """Run the path over WARM_UP + `records` messages (of WARM_UP + `most` built either way)."""
    pipeline = throughput.count_words("ir", "ir-words", "ir-out", "exactly_once")
    spec = pipeline["count-words"]
    limits = TopicLimits({t: Limit() for t in [*spec.outputs, spec.changelog, spec.timers]})
    collector = Collector(producer_config("127.0.0.1:1"), limits)
    collector.producer = Dropped()  # type: ignore[assignment]
    io = PartIO(pipeline, spec, collector, {"ir-words": 4}, ErrorPolicy(spec.group, "stop"))
    with tempfile.TemporaryDirectory() as state:
        task = KeyedTask(io, 0, TaskStore(Path(state) / "task-0", decode_timer))
        inp = task.inputs[0]
        words = random.Random(1).choices(
            throughput.zipf_words(throughput.VOCABULARY * 10), k=WARM_UP + most
        )
        msgs = [
            Message(topic=inp.topic, partition=0, offset=i, key=w.encode(),
                    value=orjson.dumps({"word": w}), timestamp=(1, 1_700_000_000_000 + i))
            for i, w in enumerate(words)
        ]  # fmt: skip
        for i in range(0, WARM_UP + records, RUN):
            task.handle_run(msgs[i : i + RUN], inp)
        task.close()
    sys.stdout.flush()
    os._exit(0)  # librdkafka's threads (no broker to reach) are not waited for


def counted(records: int, most: int) -> int:
    """Instructions callgrind counts for the whole process over `records` records."""
    args = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
    args += [__file__, "--inner", str(records), "--records", str(most)]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no count from callgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--inner", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner is not None:
        path(args.inner, args.records)
    per_record = (counted(args.records, args.records) - counted(0, args.records)) / args.records
    print(f"instructions per record: {per_record:,.0f} (callgrind, {args.records} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
