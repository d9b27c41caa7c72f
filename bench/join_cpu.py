"""CPU per record of the interval join's executor alone, in this process: bench/join.py's input
(orders x payments, Zipf customers) fed to the join's `Executor` with in-memory state and
timer backends, productions encoded as the Kafka output encodes them (JSON, key, id header),
a commit's local half (state and timer changes to the backends) every `--commit-every`
records, and the input low watermark moved to the lower of the two inputs' latest times
every `--watermark-every` records (bench/join.py's sources: the highest time read).

No broker, no consumer, no producer: what is left is the join's own per-record work and the
executor's around it, so a change to either can be compared before and after in seconds (the
minimum over `--rounds` rounds of the process's CPU time per input record). A first round,
not measured, is checked against bench/join.py's reference: a result missing or unexpected
fails the run (exit 1) before any figure. `--profile` prints a cProfile of one round instead.

    python bench/join_cpu.py [--records N] [--keys K] [--minutes M] [--how inner|left|outer]
                             [--rounds R] [--commit-every N] [--watermark-every N] [--profile]

Not run by run_all.py (it defines no QUICK_ARGS): a tool for whoever tunes the join.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import heapq
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.join import Input, make_input, orders_payments, reference  # noqa: E402
from framework.core.api import Record  # noqa: E402
from framework.core.executor import Executor  # noqa: E402
from framework.core.keyed_state import MemoryStateBackend  # noqa: E402
from framework.core.timers import MemoryTimerBackend  # noqa: E402
from framework.serde.json_codec import encode_json  # noqa: E402

ORDERS, PAYMENTS = "orders", "payments"


class EncodingOutput:
    """Encodes each production as the Kafka output does (value, key, id header) and keeps a
    count; a dead letter is a failure of the benchmark."""

    def __init__(self) -> None:
        self.produced = 0

    def encode(self, stream: str, key: str, value: Any, timestamp: int, record_id: str) -> Any:
        return stream, key.encode(), encode_json(value), -1, timestamp, [("id", record_id.encode())]

    def produce_all(self, encoded: list[Any]) -> None:
        self.produced += len(encoded)

    def dead_letter(
        self, record: Any, error: BaseException, stage: str, source: Any = None
    ) -> None:
        raise RuntimeError(f"dead letter at {stage}: {error}") from error


class CheckingOutput(EncodingOutput):
    """Also keeps each result as bench/join.py's reference has it: (key, order id, payment
    id), for the round that is checked, not measured."""

    def __init__(self) -> None:
        super().__init__()
        self.results: collections.Counter = collections.Counter()

    def encode(self, stream: str, key: str, value: Any, timestamp: int, record_id: str) -> Any:
        left, right = value["left"], value["right"]
        self.results[(key, left and left["id"], right and right["id"])] += 1
        return super().encode(stream, key, value, timestamp, record_id)


def records(data: Input) -> list[Record]:
    """The measured input of both sides, merged in time order (orders first on a tie)."""
    sides = [
        [(e.timestamp, n, Record(e.key, {"id": e.id}, e.timestamp, stream, e.id)) for e in events]
        for n, (stream, events) in enumerate(
            ((ORDERS, data.events["left"]), (PAYMENTS, data.events["right"]))
        )
    ]
    return [r for _, _, r in heapq.merge(*sides, key=lambda x: (x[0], x[1]))]


def run(
    how: str,
    batch: list[Record],
    commit_every: int,
    watermark_every: int,
    output: EncodingOutput | None = None,
) -> tuple[float, int]:
    """One pass over `batch` by a fresh executor: process CPU seconds, and results."""
    pipeline = orders_payments("join-cpu", ORDERS, PAYMENTS, "out", how)
    spec = pipeline.computations["join"]
    state, timers = MemoryStateBackend(), MemoryTimerBackend()
    output = EncodingOutput() if output is None else output
    executor = Executor(spec, state, timers, output)
    last = {ORDERS: 0, PAYMENTS: 0}
    t0 = time.process_time()
    for i, record in enumerate(batch, 1):
        last[record.stream] = record.timestamp
        executor.process(record)
        if i % watermark_every == 0:
            executor.advance_watermark(min(last.values()))
        if i % commit_every == 0:
            state.apply(executor.state.changes())
            timers.apply(executor.timers.changes())
            executor.state.committed()
            executor.timers.committed()
    executor.advance_watermark(max(last.values()) + 10**9)
    state.apply(executor.state.changes())
    executor.state.committed()
    return time.process_time() - t0, output.produced


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--how", default="inner", choices=["inner", "left", "outer"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--commit-every", type=int, default=1_000)
    parser.add_argument("--watermark-every", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="cProfile one round")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    data = make_input(args.records, args.keys, args.minutes, base=1_700_000_000_000)
    batch = records(data)
    checked = CheckingOutput()  # a round checked against the reference before any figure
    run(args.how, batch, args.commit_every, args.watermark_every, checked)
    want = reference(data.events["left"], data.events["right"], args.how)
    if checked.results != want:
        missing, unexpected = want - checked.results, checked.results - want
        print(f"WRONG: {sum(missing.values())} missing, {sum(unexpected.values())} unexpected")
        return 1
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        run(args.how, batch, args.commit_every, args.watermark_every)
        profiler.disable()
        stats = pstats.Stats(profiler).strip_dirs()
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
        return 0
    rounds = [
        run(args.how, batch, args.commit_every, args.watermark_every) for _ in range(args.rounds)
    ]
    best = min(cpu for cpu, _ in rounds)
    print(
        f"join {args.how}: {len(batch)} records, {rounds[0][1]} results; CPU us/record"
        f" {best / len(batch) * 1e6:.2f} (min of {args.rounds} rounds)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
