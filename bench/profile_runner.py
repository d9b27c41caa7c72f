"""cProfile of logwheel's per-record path: the count-words stage of bench/throughput.py, with
the Runner in this process so the profiler sees it.

The input is gated the same way (bench/throughput.py's docstring): the runner starts, warms up
on one record per partition, and only then is the profiler switched on — in the runner's own
thread, by the stop event the runner polls every loop — and the input committed. Profiling
ends when every output is readable, so startup and shutdown stay out of the figures.

    python bench/profile_runner.py [--records N] [--guarantee at_least_once] [--distinct] [--top 30]

Not run by run_all.py (it defines no QUICK_ARGS): a tool for whoever tunes the runtime.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, throughput  # noqa: E402
from framework.streaming.runner import Runner  # noqa: E402


class ProfiledStop(threading.Event):
    """The runner's stop event, which also switches the profiler on and off in the runner's
    thread: on once `begin` is set, off when the stop is seen."""

    def __init__(self, profiler: cProfile.Profile) -> None:
        super().__init__()
        self.profiler = profiler
        self.begin = threading.Event()
        self.profiling = False

    def is_set(self) -> bool:
        stopped = super().is_set()
        if self.profiling and stopped:
            self.profiler.disable()
            self.profiling = False
        elif not self.profiling and not stopped and self.begin.is_set():
            self.profiling = True
            self.profiler.enable()
        return stopped


class RunnerThread:
    """`runner.run(stop)` in a thread of this process; `healthy()` raises once it failed or
    stopped, `begin()` switches the profiler on (a ProfiledStop), `end()` stops it."""

    def __init__(self, runner: Runner, stop: threading.Event) -> None:
        self.runner, self.stop = runner, stop
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._target, name="runner")

    def _target(self) -> None:
        try:
            self.runner.run(self.stop)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.failure.append(error)

    def start(self) -> None:
        self.thread.start()

    def healthy(self) -> None:
        if self.failure or not self.thread.is_alive():
            raise RuntimeError(f"the runner stopped: {self.failure!r}")

    def begin(self) -> None:
        if isinstance(self.stop, ProfiledStop):
            self.stop.begin.set()

    def end(self) -> None:
        self.stop.set()
        self.thread.join(60)


def report(profiler: cProfile.Profile, out: Path, rate: str, top: int) -> None:
    """Save the profile to `out` and print its `top` rows by own and by cumulative time."""
    out.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(out)
    print(f"{rate} under the profiler; stats in {common.shown(out)}")
    for key in ("tottime", "cumulative"):
        buffer = io.StringIO()
        pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(key).print_stats(top)
        print(f"\n== by {key} ==")
        print(buffer.getvalue())


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("profile logwheel's count-words stage", {"records": 200_000})
    parser.add_argument(
        "--guarantee", default="exactly_once", choices=["exactly_once", "at_least_once"]
    )
    parser.add_argument("--top", type=int, default=30, help="rows of each listing")
    parser.add_argument(
        "--distinct", action="store_true", help="every record a key of its own (high cardinality)"
    )
    parser.add_argument(
        "--no-profile", action="store_true", help="only time the in-process run (no cProfile)"
    )
    parser.add_argument("--commit-interval-ms", type=int, help="Runner(commit_interval_ms=...)")
    parser.add_argument("--max-batch", type=int, help="Runner(max_batch=...)")
    parser.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client setting passed through (as [kafka] in --config), repeatable",
    )
    args = parser.parse(argv)
    out = args.out or common.RESULTS / "profile.pstats"
    tuning = {k: v for k in ("commit_interval_ms", "max_batch") if (v := getattr(args, k))}
    if args.kafka:
        tuning["kafka"] = dict(item.split("=", 1) for item in args.kafka)
    profiler = cProfile.Profile()
    stop = threading.Event() if args.no_profile else ProfiledStop(profiler)
    with common.Workspace(args.bootstrap, "profile", args.keep) as ws:
        source, output = f"{ws.run}-words", f"{ws.run}-out"
        build = "bench.throughput:count_words"
        pipeline = ws.pipeline(build, ws.run, source, output, args.guarantee)
        runner = Runner(
            pipeline,
            "count-words",
            bootstrap=args.bootstrap,
            state_dir=ws.dir / "state",
            **tuning,
        )
        thread = RunnerThread(runner, stop)

        words = (
            [f"k{i:07d}" for i in range(args.records)]
            if args.distinct
            else throughput.zipf_words(args.records)
        )
        gate = throughput.Gate(args.bootstrap, source, words)
        outputs = throughput.Outputs(args.bootstrap, output)
        try:
            thread.start()
            outputs.wait(throughput.PARTITIONS, common.STARTUP_TIMEOUT_S, thread.healthy)
            thread.begin()
            t0, cpu0 = time.monotonic(), time.process_time()
            gate.open()
            records = throughput.PARTITIONS + args.records
            outputs.wait(records, throughput.RUN_TIMEOUT_S, thread.healthy)
            seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
        finally:
            thread.end()
            outputs.close()
            gate.close()

    rate = f"{args.guarantee}: {args.records} records in {seconds:.2f}s"
    rate += f" ({args.records / seconds:,.0f} records/s"
    rate += f", CPU {cpu / args.records * 1e6:.1f} us/record, this process's threads)"
    if args.no_profile:
        print(f"{rate}, in process, not profiled{' ' if tuning else ''}{tuning or ''}")
        return 0
    report(profiler, out, rate, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
