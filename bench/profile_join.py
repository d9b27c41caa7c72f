"""cProfile of logwheel's interval join on Kafka: bench/join.py's `logwheel <how>` contender
(orders x payments, Zipf customers, exactly-once) with the Runner in this process so the
profiler sees it, gated as bench/profile_runner.py gates count-words: the runner starts and
answers the warm-up pairs, then the profiler is switched on in the runner's thread and the
input committed; profiling ends when every expected result is readable.

    python bench/profile_join.py [--records N] [--keys K] [--minutes M] [--how inner]
                                 [--no-profile] [--top 30] [--out F]

Not run by run_all.py (it defines no QUICK_ARGS): a tool for whoever tunes the join.
"""

from __future__ import annotations

import cProfile
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, join  # noqa: E402
from bench.profile_runner import ProfiledStop, RunnerThread, report  # noqa: E402
from bench.windowed import Results  # noqa: E402
from framework.streaming.runner import Runner  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(
        "profile logwheel's interval join", {"records": 30_000, "keys": 1_000, "minutes": 10}
    )
    parser.add_argument("--how", default="inner", choices=join.HOWS)
    parser.add_argument("--top", type=int, default=30, help="rows of each listing")
    parser.add_argument("--no-profile", action="store_true", help="only time the run")
    args = parser.parse(argv)
    out = args.out or common.RESULTS / "profile_join.pstats"
    data = join.make_input(args.records, args.keys, args.minutes)
    total = sum(data.expected(args.how).values())
    profiler = cProfile.Profile()
    stop = threading.Event() if args.no_profile else ProfiledStop(profiler)
    with common.Workspace(args.bootstrap, "profile-join", args.keep) as ws:
        topics = {"left": f"{ws.run}-orders", "right": f"{ws.run}-payments"}
        output = f"{ws.run}-out"
        build = "bench.join:orders_payments"
        pipeline = ws.pipeline(build, ws.run, topics["left"], topics["right"], output, args.how)
        runner = Runner(pipeline, "join", bootstrap=args.bootstrap, state_dir=ws.dir / "state")
        thread = RunnerThread(runner, stop)
        gate = join.Gate(args.bootstrap, topics, data)
        results = Results(args.bootstrap, output)
        try:
            thread.start()
            if not results.wait(join.PARTITIONS, common.STARTUP_TIMEOUT_S, thread.healthy):
                raise RuntimeError("no warm-up results")
            thread.begin()
            t0, cpu0 = time.monotonic(), time.process_time()
            gate.open()
            results.wait(total, join.RUN_TIMEOUT_S, thread.healthy)
            seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
        finally:
            thread.end()
            results.close()
            gate.close()

    n = data.records()
    rate = f"join {args.how}: {n} records in {seconds:.2f}s ({results.seen}/{total} results"
    rate += f", CPU {cpu / n * 1e6:.1f} us/record, this process's threads)"
    if args.no_profile:
        print(f"{rate}, not profiled")
        return 0
    report(profiler, out, rate, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
