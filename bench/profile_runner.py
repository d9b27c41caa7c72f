"""cProfile of logwheel's per-record path: the count-words stage of bench/throughput.py, with
the Runner in this process so the profiler sees it.

The input is gated the same way (bench/throughput.py's docstring): the runner starts, warms up
on one record per partition, and only then is the profiler switched on — in the runner's own
thread, by the stop event the runner polls every loop — and the input committed. Profiling
ends when every output is readable, so startup and shutdown stay out of the figures.

    python bench/profile_runner.py [--records N] [--guarantee at_least_once] [--top 30]

Not run by run_all.py (it defines no QUICK_ARGS): a tool for whoever tunes the runtime.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka.admin import NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import (  # noqa: E402
    PARTITIONS,
    REPO,
    RESULTS,
    Bench,
    Gate,
    Outputs,
    bootstrap_from,
    create_topics,
    pipeline_topics,
)

from framework.runner import Runner  # noqa: E402
from jobs.wordcount import CountWords  # noqa: E402


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="profile logwheel's count-words stage")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument(
        "--guarantee", default="exactly_once", choices=["exactly_once", "at_least_once"]
    )
    parser.add_argument("--bootstrap", help="else LOGWHEEL_BOOTSTRAP, else the embedded broker")
    parser.add_argument("--top", type=int, default=30, help="rows of each listing")
    parser.add_argument("--out", type=Path, default=RESULTS / "profile.pstats")
    parser.add_argument(
        "--no-profile", action="store_true", help="only time the in-process run (no cProfile)"
    )
    parser.add_argument("--commit-interval-ms", type=int, help="Runner(commit_interval_ms=...)")
    parser.add_argument("--max-batch", type=int, help="Runner(max_batch=...)")
    args = parser.parse_args(argv)
    bootstrap = bootstrap_from(args.bootstrap)

    from framework import Pipeline

    workdir = Path(tempfile.mkdtemp(prefix="logwheel-profile-"))
    bench = Bench(bootstrap, args.records, workdir)
    name = f"{bench.run}-profile"
    source, output = f"{name}-words", f"{name}-out"
    pipeline = Pipeline(name)
    pipeline.source(source)
    pipeline.computation(
        "count-words",
        lambda: CountWords(output),
        inputs={source: None},
        outputs={output: "wordcount.WordCount"},
        guarantee=args.guarantee,
    )
    bench.topics.append(source)
    bench.admin.create_topics([NewTopic(source, PARTITIONS, 1)])[source].result(30)
    create_topics(bootstrap, pipeline)
    bench.topics += [t.name for t in pipeline_topics(pipeline) if t.name != source]
    bench.groups.append(pipeline["count-words"].group)

    profiler = cProfile.Profile()
    stop = threading.Event() if args.no_profile else ProfiledStop(profiler)
    tuning = {
        name: value
        for name, value in (
            ("commit_interval_ms", args.commit_interval_ms),
            ("max_batch", args.max_batch),
        )
        if value is not None
    }
    runner = Runner(
        pipeline, "count-words", bootstrap=bootstrap, state_dir=workdir / "state", **tuning
    )
    failure: list[BaseException] = []

    def target() -> None:
        try:
            runner.run(stop)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            failure.append(error)

    gate = Gate(bootstrap, source, bench.words)
    outputs = Outputs(bootstrap, output)
    thread = threading.Thread(target=target, name="runner")
    try:
        thread.start()
        alive = lambda: thread.is_alive()  # noqa: E731
        why = lambda: repr(failure)  # noqa: E731
        outputs.wait(PARTITIONS, 120, alive, why)
        if isinstance(stop, ProfiledStop):
            stop.begin.set()
        t0, cpu0 = time.monotonic(), time.process_time()
        gate.open()
        outputs.wait(PARTITIONS + args.records, 600, alive, why)
        seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
    finally:
        stop.set()
        thread.join(60)
        outputs.close()
        gate.close()
        bench.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)

    rate = f"{args.guarantee}: {args.records} records in {seconds:.2f}s"
    rate += f" ({args.records / seconds:,.0f} records/s"
    rate += f", CPU {cpu / args.records * 1e6:.1f} us/record, this process's threads)"
    if args.no_profile:
        print(f"{rate}, in process, not profiled{' ' if tuning else ''}{tuning or ''}")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(args.out)
    print(f"{rate} under the profiler; stats in {args.out.relative_to(REPO)}")
    for key in ("tottime", "cumulative"):
        buffer = io.StringIO()
        stats = pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(key)
        stats.print_stats(args.top)
        print(f"\n== by {key} ==")
        print(buffer.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
