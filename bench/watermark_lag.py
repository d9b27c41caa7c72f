"""Low watermark lag behind wall time in a three-stage pipeline, beside MillWheel §8.2 (Fig. 15).

The pipeline: an `Injector` (framework/streaming/injector.py, in a thread of this process) writes
`{"seq", "a", "b", "c"}` records to a 4-partition source stream at a steady rate with Kafka
timestamp = wall-clock send time, and every `--advance-ms` commits them with the watermark
`now − --bound-ms` (one transaction: records + mark). Three computations follow, each its own
process under one `logwheel run` (the supervisor starts one child per computation):

    injector → stage1 (key_by "a") → stage2 (key_by "b") → stage3 (key_by "c")

Each stage forwards every record to the next stage's stream (stage3 forwards nothing) and
counts records per key in 1-second event-time windows, with one event-time timer per window
that emits the count to the stage's `windows` stream when the low watermark passes the window's
end — so the stages' watermarks gate real output. With `--keying same`, stages 2 and 3 read
their input by its Kafka key (no repartition hop); by default every stage re-keys, so each
stage is a many-to-many shuffle through its `.by-key` topic as in MillWheel.

What is measured: a read_committed consumer (this process, main thread) follows every watermark
channel — `<pipeline>.injector.watermarks` and `<pipeline>.stageN.watermarks` — and keeps the
latest mark of each producer. Once a second it samples, per stage, the stage's low watermark:
the minimum over its keyed tasks' published marks (`stageN/task/P`, P = 0..3: each is
min(input low watermark, earliest pending event-time timer), what MillWheel calls the
computation's low watermark), and lag = wall time at the sample − that watermark. It samples
the injector's mark the same way (`injector`: the source's watermark, which trails wall time by
the bound plus up to one advance period) and the repartition tasks' marks (`stageN by-key`:
the watermark of the shuffle into stage N, one commit earlier). Samples from the first
`--warmup` seconds after every stage's watermark is known are dropped; the next `--duration`
seconds are reported as mean and stdev per stage, beside the paper's (200 CPUs, Bigtable):
stage1 1795 ± 159 ms, stage2 1954 ± 127, stage3 2081 ± 140. The same consumer reads the
stages' window counts and reports `window delay`: the time a window's count became readable
minus the window's end — how fresh a watermark-gated aggregate is, the reason §8.2 matters.

Before any figure is shown the run is checked (bench/verify.py): once the job has stopped, the
window streams and watermark channels are read to their end (read_committed). Every window a
stage's final low watermark has passed must have been written exactly once with the count of
the records sent in it (the reference: the injector's records, keyed as the stage keys them);
a window written after that (closed before the job stopped, its mark not yet out) must have
its right count too. A window `missing`, `unexpected` (a wrong count is one missing and one
unexpected) or `duplicated` fails the benchmark (exit 1).

    python bench/watermark_lag.py [--quick] [--rate R] [--duration S] [--warmup S]
        [--advance-ms MS] [--bound-ms MS] [--keying different|same]
        [--guarantee exactly_once|at_least_once] [--bootstrap H:P] [--out FILE] [--keep]
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, verify  # noqa: E402
from framework import Computation, Pipeline, key_by  # noqa: E402
from framework.core.clock import now_ms  # noqa: E402
from framework.core.pipeline import InjectorWatermark  # noqa: E402
from framework.core.watermarks import decode_mark, injector_producer  # noqa: E402
from framework.streaming.injector import Injector  # noqa: E402

QUICK_ARGS = ["--quick"]
"""What `bench/run_all.py --quick` passes: a reduced run (~10 samples per stage)."""

FULL = {"rate": 200.0, "duration": 60.0, "warmup": 10.0}
QUICK = {"rate": 200.0, "duration": 10.0, "warmup": 3.0}
STAGES = ("stage1", "stage2", "stage3")
PAPER = {  # MillWheel §8.2, Figure 15: mean and stdev of the lag, ms
    "stage1": (1795, 159),
    "stage2": (1954, 127),
    "stage3": (2081, 140),
}
INJECTOR = "injector"
PARTITIONS = 4
WINDOW_MS = 1000


class Stage(Computation):
    """Forwards every record; counts records per key and window; emits each window's count
    when the low watermark passes its end."""

    def __init__(self, forward: str | None, windows: str) -> None:
        self.forward, self.windows = forward, windows

    def process_record(self, ctx, record):
        if self.forward:
            ctx.produce(self.forward, record.value)
        start = record.timestamp - record.timestamp % WINDOW_MS
        counts = dict(ctx.state.get("windows", {}))
        counts[str(start)] = counts.get(str(start), 0) + 1
        ctx.state["windows"] = counts
        ctx.set_timer(f"w{start}", start + WINDOW_MS)

    def process_timer(self, ctx, timer):
        start = timer.time - WINDOW_MS
        counts = dict(ctx.state.get("windows", {}))
        count = counts.pop(str(start), 0)
        if counts:
            ctx.state["windows"] = counts
        else:
            ctx.state.pop("windows", None)
        ctx.produce(self.windows, {"key": ctx.key, "start": start, "count": count})


def build(name: str, prefix: str, guarantee: str, keying: str) -> Pipeline:
    """injector → stage1 → stage2 → stage3, re-keyed at every stage unless keying="same"."""
    pipeline = Pipeline(name, partitions=PARTITIONS)
    upstream = prefix + "events"
    pipeline.source(upstream, watermark=InjectorWatermark(INJECTOR))
    for i, field in enumerate(("a", "b", "c"), 1):
        forward = prefix + f"s{i}" if i < 3 else None
        windows = prefix + f"s{i}-windows"
        pipeline.computation(
            f"stage{i}",
            (lambda forward=forward, windows=windows: Stage(forward, windows)),
            inputs={upstream: key_by(field) if keying == "different" or i == 1 else None},
            outputs={windows: None, **({forward: None} if forward else {})},
            guarantee=guarantee,
        )
        upstream = forward
    return pipeline


def fields(seq: int) -> dict[str, int]:
    """The injector's record `seq`: the fields the stages key by."""
    return {"seq": seq, "a": seq % 50, "b": seq * 7 % 53, "c": seq * 13 % 47}


Window = tuple[str, str, int, int]
"""A window's count as the check sees it: (stage, key, start, count)."""


def reference(stamps: Sequence[int], keying: str) -> set[Window]:
    """Every stage's window counts of the records sent at `stamps` (by seq): what each stage
    writes for a window once it closes. Keyed by "a", "b", "c" in turn; with keying "same"
    stages 2 and 3 keep the key stage 1 forwards with ("a")."""
    keys = ("a", "b", "c") if keying == "different" else ("a", "a", "a")
    counts: collections.Counter[tuple[str, str, int]] = collections.Counter()
    for seq, stamp in enumerate(stamps):
        record = fields(seq)
        for stage, key in zip(STAGES, keys, strict=True):
            counts[(stage, str(record[key]), stamp - stamp % WINDOW_MS)] += 1
    return {(stage, key, start, n) for (stage, key, start), n in counts.items()}


def check_windows(
    expected: set[Window], written: collections.Counter, lows: dict[str, int]
) -> dict:
    """The windows written against `expected`: each one whose end a stage's final low
    watermark (`lows`) has passed must be there; one written later must be right too.
    `windows_required`: how many windows each stage had to have written."""
    required = {w for w in expected if w[2] + WINDOW_MS <= lows.get(w[0], -1)}
    check = verify.compare(required | (written.keys() & expected), written)
    check["windows_required"] = {s: sum(w[0] == s for w in required) for s in STAGES}
    return check


class Feeder(common.Worker):
    """Sends records at `rate` and advances the watermark to now − bound every `advance_ms`."""

    def __init__(self, pipeline: Pipeline, bootstrap: str, stream: str, args) -> None:
        super().__init__()
        self.injector = Injector(pipeline, INJECTOR, bootstrap=bootstrap)
        self.stream, self.rate = stream, args.rate
        self.advance_s, self.bound_ms = args.advance_ms / 1000, args.bound_ms
        self.sent = 0
        self.stamps: list[int] = []  # the timestamp of each record, by seq
        self.advances: list[float] = []  # ms each advance (commit) took

    def work(self) -> None:
        try:
            self._send()
        finally:
            self.injector.close()

    def _send(self) -> None:
        start = time.monotonic()
        next_advance = start + self.advance_s
        while not self.stop.is_set():
            now = time.monotonic()
            while start + self.sent / self.rate <= now:
                seq = self.sent
                stamp = now_ms()
                self.injector.send(self.stream, fields(seq), key=str(seq), timestamp=stamp)
                self.stamps.append(stamp)
                self.sent += 1
            if now >= next_advance:
                t = time.perf_counter()
                self.injector.advance(now_ms() - self.bound_ms)
                self.advances.append((time.perf_counter() - t) * 1000)
                next_advance += self.advance_s
                if next_advance < now:  # fell behind: do not burst
                    next_advance = now + self.advance_s
            delay = min(start + self.sent / self.rate, next_advance) - time.monotonic()
            if delay > 0:
                time.sleep(delay)


class Watcher:
    """Follows the watermark channels and window streams (read_committed)."""

    def __init__(self, bootstrap: str, pipeline: Pipeline, windows: dict[str, str]) -> None:
        self.pipeline = pipeline
        channels = [f"{pipeline.name}.{INJECTOR}.watermarks"]
        channels += [pipeline[s].watermarks for s in STAGES]
        settings = {"fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 0}
        self.consumer = common.follow(bootstrap, [*channels, *windows.values()], **settings)
        self.window_stage = {topic: stage for stage, topic in windows.items()}
        self.marks: dict[str, tuple[int, bool]] = {}  # producer -> (watermark, idle)
        self.window_delays: dict[str, list[tuple[float, float]]] = {s: [] for s in STAGES}
        self.series = {INJECTOR: [injector_producer(INJECTOR, 0)]}  # name -> its producers
        for stage in STAGES:
            spec = pipeline[stage]
            if spec.inputs[0].key is not None:  # every stream has PARTITIONS partitions
                by_key = f"{stage}/by-key/{spec.inputs[0].stream}"
                self.series[f"{stage} by-key"] = [f"{by_key}/{p}" for p in range(PARTITIONS)]
            self.series[stage] = [f"{stage}/task/{p}" for p in range(spec.partitions)]

    def poll_until(self, deadline: float) -> None:
        while (left := deadline - time.monotonic()) > 0:
            msg = self.consumer.poll(min(left, 0.05))
            now_ms = time.time_ns() / 1e6
            for record in common.records([] if msg is None else [msg]):
                stage = self.window_stage.get(record.topic())
                if stage is not None:
                    end = json.loads(record.value())["start"] + WINDOW_MS
                    self.window_delays[stage].append((time.monotonic(), now_ms - end))
                elif record.value() is not None:
                    mark = decode_mark(record.value())
                    self.marks[mark.producer] = (mark.watermark, mark.idle)

    def low_watermarks(self) -> dict[str, int | None]:
        """Per series: the minimum over its producers' latest marks (None until each has
        published; idle producers are left out, as readers do)."""
        result: dict[str, int | None] = {}
        for name, producers in self.series.items():
            values = [self.marks.get(p) for p in producers]
            active = [v[0] for v in values if v is not None and not v[1]]
            result[name] = min(active) if active and None not in values else None
        return result

    def close(self) -> None:
        self.consumer.close()


def measure(args, ws: common.Workspace) -> dict:
    prefix = f"{ws.run}-"
    pipeline = ws.pipeline("bench.watermark_lag:build", ws.run, prefix, args.guarantee, args.keying)
    windows = {s: f"{prefix}s{i}-windows" for i, s in enumerate(STAGES, 1)}
    job = ws.job(pipeline)
    watcher = Watcher(ws.bootstrap, pipeline, windows)
    feeder = Feeder(pipeline, ws.bootstrap, f"{prefix}events", args)
    samples: list[tuple[float, dict[str, float | None]]] = []
    try:
        launched = time.monotonic()
        job.start()
        feeder.start()
        deadline = launched + common.STARTUP_TIMEOUT_S  # until every stage's watermark is known
        while watcher.low_watermarks()["stage3"] is None:
            common.check(job, feeder, deadline=deadline, what="watermarks")
            watcher.poll_until(time.monotonic() + 0.2)
        startup = time.monotonic() - launched
        print(f"  every stage's watermark known after {startup:.1f}s; warming up", flush=True)
        begin = time.monotonic() + args.warmup
        end = begin + args.duration
        tick, t0 = time.monotonic(), None
        while True:  # one sample a second, after each second's reading
            tick += 1.0
            watcher.poll_until(tick)
            common.check(job, feeder)
            if (now := time.monotonic()) > end:
                break
            if now >= begin:
                if t0 is None:
                    cpu0, t0, sent0 = common.cpu_seconds(job.proc.pid), now, feeder.sent
                wall = time.time_ns() / 1e6
                lows = watcher.low_watermarks()
                samples.append((now, {k: None if w is None else wall - w for k, w in lows.items()}))
        cpu1, t1 = common.cpu_seconds(job.proc.pid), time.monotonic()
        load = os.getloadavg()[0]
    finally:
        feeder.stop.set()
        feeder.join(30)
        job.stop()
        watcher.close()
    stage_of = {topic: stage for stage, topic in windows.items()}

    def window(msg) -> Window:
        value = json.loads(msg.value())
        return stage_of[msg.topic()], value["key"], value["start"], value["count"]

    written = verify.read(ws.bootstrap, windows.values(), window)
    channels = [pipeline[s].watermarks for s in STAGES]
    marks = verify.read(ws.bootstrap, channels, lambda m: mark_of(m.value()))
    lows = {s: low(marks, watcher.series[s]) for s in STAGES}
    check = check_windows(reference(feeder.stamps, args.keying), written, lows)
    series = []
    for name in watcher.series:
        values = [lags[name] for _, lags in samples if lags[name] is not None]
        paper_mean, paper_stdev = PAPER.get(name, (None, None))
        series.append(
            {"name": name, "samples": len(values), **common.spread(values)}
            | {"paper_mean": paper_mean, "paper_stdev": paper_stdev}
            | {
                "lags_ms": [
                    None if lags[name] is None else round(lags[name]) for _, lags in samples
                ]
            }
        )
    delays = []
    for stage in STAGES:
        d = [ms for t, ms in watcher.window_delays[stage] if begin <= t <= end]
        if d:
            delays.append({"stage": stage, "windows": len(d), **common.spread(d)})
    return {
        "startup_s": startup,
        "achieved_rate": (feeder.sent - sent0) / (t1 - t0),
        "cpu_pct": float("nan") if cpu0 is None else 100 * (cpu1 - cpu0) / (t1 - t0),
        "load": load,
        "series": series,
        "window_delays": delays,
        "injector_advance_ms": {"n": len(feeder.advances), **common.spread(feeder.advances)},
        "samples": [{"t": round(t - begin, 3), **lags} for t, lags in samples],
        "windows_checked": sum(written.values()),
        **check,
    }


def mark_of(raw: bytes | None) -> tuple[str, int] | None:
    """A watermark channel's record as (producer, watermark); None for a tombstone."""
    if raw is None:
        return None
    mark = decode_mark(raw)
    return mark.producer, mark.watermark


def low(marks: collections.Counter, producers: Sequence[str]) -> int:
    """The lowest over `producers` of the highest watermark each published (-1 if one never
    published): where a stage's low watermark stood when the job stopped."""
    highest: dict[str, int] = {}
    for mark in marks:
        if mark is not None:
            highest[mark[0]] = max(mark[1], highest.get(mark[0], -1))
    return min(highest.get(p, -1) for p in producers)


COLUMNS = [("series", -15), ("samples", 7), ("mean ms", 8), ("stdev", 7), ("min", 7)]
COLUMNS += [("max", 7), ("+ prev", 7), ("paper mean±sd", 14), ("x paper", 7)]


def table(series: Sequence[dict]) -> str:
    lines, previous = [], None
    for s in series:
        cells = [s["name"], s["samples"]] + [f"{s[k]:.0f}" for k in ("mean", "stdev", "min", "max")]
        cells.append("" if previous is None else f"{s['mean'] - previous:.0f}")
        if s["paper_mean"] is not None:
            cells += [f"{s['paper_mean']}±{s['paper_stdev']}", f"{s['mean'] / s['paper_mean']:.3f}"]
        lines.append(cells)
        previous = s["mean"]
    return common.table(COLUMNS, lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("low watermark lag per stage of three stages", FULL, QUICK)
    parser.add_argument("--advance-ms", type=int, default=50, help="injector watermark period (50)")
    parser.add_argument(
        "--bound-ms", type=int, default=100, help="injector watermark = now - this (100)"
    )
    parser.add_argument("--keying", choices=("different", "same"), default="different")
    parser.add_argument(
        "--guarantee", choices=("exactly_once", "at_least_once"), default="exactly_once"
    )
    args = parser.parse(argv)

    print(
        f"watermark lag: injector -> stage1 -> stage2 -> stage3 ({args.keying} keys, "
        f"{args.guarantee}) at {args.rate:g} records/s; watermark now-{args.bound_ms} ms every "
        f"{args.advance_ms} ms; {args.warmup:g}s warm-up + {args.duration:g}s sampled once a "
        f"second, on {args.bootstrap} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    with common.Workspace(args.bootstrap, "wl", args.keep) as ws:
        result = measure(args, ws)
    failed = verify.failures([result], lambda _: "the three stages' windows")
    if failed:
        common.write_results("watermark_lag", args, **result, failed=failed)
        return verify.report(failed)
    print(f"{result['windows_checked']} windows {verify.describe(result)}")
    print()
    print("lag = wall time at the sample - low watermark (ms); a stage's low watermark is the")
    print("minimum over its keyed tasks' published marks; 'by-key' = its repartition tasks'")
    print("marks (the shuffle into it); '+ prev' = mean over the row above.")
    print(table(result["series"]))
    if result["window_delays"]:
        print("\nwindow delay = 1-s window count readable - window end (ms):")
        for d in result["window_delays"]:
            print(
                f"  {d['stage']}: {d['windows']} windows, p50 {d['p50']:.0f}, "
                f"p95 {d['p95']:.0f}, mean {d['mean']:.0f}"
            )
    adv = result["injector_advance_ms"]
    print(
        f"\ninjector: {result['achieved_rate']:.0f} records/s sent; advance() (commit) p50 "
        f"{adv['p50']:.1f} ms, p95 {adv['p95']:.1f} ms over {adv['n']}; job CPU "
        f"{result['cpu_pct']:.0f}% of one core (3 stages); load {result['load']:.1f}"
    )
    settings = ("rate", "duration", "warmup", "advance_ms", "bound_ms", "keying", "guarantee")
    common.write_results(
        "watermark_lag",
        args,
        paper="MillWheel §8.2 (Figure 15)",
        settings={k: getattr(args, k) for k in settings},
        method=(
            "a read_committed consumer follows the watermark channels; once a second, per "
            "stage, lag = wall time - min over the stage's keyed tasks' latest marks"
        ),
        paper_ms={k: {"mean": m, "stdev": s} for k, (m, s) in PAPER.items()},
        **result,
        failed=failed,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
