"""Record delay through one differently-keyed stage, beside MillWheel §8.1 (Figure 13).

The pipeline (MillWheel's "single-stage pipeline that buckets and sorts numbers"): a plain
idempotent producer writes `{"seq", "n", "sent_us"}` records to a 4-partition source stream,
keyed by the sequence number (key A), at a steady rate, with Kafka timestamp = wall-clock send
time. ONE computation, `bucket-sort`, reads it with `key_by("bucket")` (key B = n // 10,000, 100
buckets), so every record crosses the many-to-many shuffle through the computation's
`.by-key` repartition topic; per bucket it keeps the 32 smallest numbers seen, sorted, in its
state, and produces one output per input (the input's timestamp kept) carrying `seq` and
`sent_us`. The computation runs as `logwheel run` (its repartition and keyed tasks share that
one process, one consumer, one producer, one transaction per commit).

What is measured: a read_committed reader (a separate thread of this process, `poll()` one
record at a time so it never waits for a batch) follows three topics from the start, and for
every record notes when it first became visible to it:

- `source`:  the source stream — Kafka's floor on this machine (produce → fetch), no logwheel;
- `by-key`:  the repartition topic — through the repartition task and its commit;
- `output`:  the output stream — the record delay MillWheel reports: send → visible downstream.

delay = (time visible to the reader) − (`sent_us`, taken just before `produce()`), both from
the same wall clock (one machine), in ms. Records sent before the first output appeared and
in the `--warmup` seconds after it are excluded (process start, group join, restore); the next
`--duration` seconds of sends are measured; a measured record that never arrives within the
drain timeout is counted as missing. Both guarantees run one after the other in one invocation
on the same broker, each with fresh topics and consumer groups; `--repeat` interleaves several
runs and pools their records. `cpu %` is the computation process's CPU time over the measured
window; `load` the machine's 1-minute load average at its end (everything shares one machine,
the broker included: tails move with it, medians much less).

The paper's figures (200 CPUs, Bigtable, no Kafka) are 3.6 ms median / 30 ms p95 with strong
productions and exactly-once disabled, and 33.7 ms / 93.8 ms with both enabled; `x p50` and
`x p95` are ours over theirs. The runtimes differ (the paper's record delay is one RPC hop;
here a record crosses two Kafka topics and, under exactly_once, two transactions), so read the
ratios as "how far from MillWheel", not as like-for-like.

`--explore` also runs variants, every one through the same `logwheel run` command: client
settings (`--config FILE.toml`, its [kafka] table), and — for the variants marked patched —
a `sitecustomize.py` put first on the job's PYTHONPATH (PATCH_SOURCE below; framework/ is not
changed) that sets `Runner` parameters the command line does not expose (`idle_poll_s`), can
apply one experimental change to the loop's idle wait (`poll-first`), and times the runner's
commit and its Kafka calls (flush, send_offsets_to_transaction, commit_transaction, the
consumer's commit) and the loop's consume() calls over the measured window.

    python bench/latency.py [--quick] [--rate R] [--duration S] [--warmup S] [--explore]
                            [--variant NAME]... [--guarantee G]... [--repeat N] [--bootstrap H:P]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from framework.broker import bootstrap_from  # noqa: E402
from framework.collector import ID_HEADER  # noqa: E402
from framework.kafka import producer_config  # noqa: E402
from tests.support import Job, unique_name  # noqa: E402

QUICK_ARGS = ["--quick"]
"""What `bench/run_all.py --quick` passes: a reduced run (~5 s of measured sends per guarantee)."""

FULL = {"rate": 300.0, "duration": 20.0, "warmup": 5.0}
QUICK = {"rate": 200.0, "duration": 5.0, "warmup": 2.0}
GUARANTEES = ("at_least_once", "exactly_once")
PAPER = {  # MillWheel §8.1, ms: without / with strong productions and exactly-once
    "at_least_once": {"p50": 3.6, "p95": 30.0},
    "exactly_once": {"p50": 33.7, "p95": 93.8},
}
COMPUTATION = "bucket-sort"
BUCKET_WIDTH = 10_000
NUMBERS = 1_000_000
KEEP = 32
STARTUP_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 30.0
RESULTS = Path(__file__).resolve().parent / "results"
HOPS = ("source", "by-key", "output")


@dataclass(frozen=True)
class Variant:
    """How the computation is run: `kafka` client overrides (--config) and, if `patched`,
    Runner parameters, the experimental poll-first wait and timings (PATCH_SOURCE)."""

    name: str
    kafka: dict = field(default_factory=dict)
    patched: bool = False
    runner: dict = field(default_factory=dict)
    poll_first: bool = False
    note: str = ""


VARIANTS = {
    v.name: v
    for v in [
        Variant("default", note="`logwheel run` as shipped"),
        Variant(
            "instrumented",
            patched=True,
            note="default settings, timing the commit and consume() calls",
        ),
        Variant(
            "fetch.wait.max.ms=1",
            kafka={"fetch.wait.max.ms": 1},
            note="consumer fetch long-poll 1 ms (default 20)",
        ),
        Variant(
            "fetch.wait.max.ms=100",
            kafka={"fetch.wait.max.ms": 100},
            note="consumer fetch long-poll 100 ms (default 20)",
        ),
        Variant("linger.ms=0", kafka={"linger.ms": 0}, note="producer linger 0 (default 1)"),
        Variant("linger.ms=5", kafka={"linger.ms": 5}, note="producer linger 5 ms (default 1)"),
        Variant(
            "idle_poll=5ms",
            patched=True,
            runner={"idle_poll_s": 0.005},
            note="Runner(idle_poll_s=0.005): the idle consume() waits 5 ms (default 20)",
        ),
        Variant(
            "idle_poll=1ms",
            patched=True,
            runner={"idle_poll_s": 0.001},
            note="Runner(idle_poll_s=0.001)",
        ),
        Variant(
            "poll-first",
            patched=True,
            poll_first=True,
            note="experimental: the idle wait is consumer.poll(20 ms), which returns at the "
            "first record, then consume(max_batch, 0) drains; default idle_poll 20 ms",
        ),
    ]
}

JOB_SOURCE = f'''"""Generated by bench/latency.py: MillWheel §8.1's bucket-and-sort stage."""
import bisect

from framework import Computation, Pipeline, key_by


class BucketSort(Computation):
    """Keeps, per bucket, the {KEEP} smallest numbers seen, sorted; one output per input."""

    def __init__(self, output):
        self.output = output

    def process_record(self, ctx, record):
        v = record.value
        numbers = list(ctx.state.get("numbers", ()))
        rank = bisect.bisect_left(numbers, v["n"])
        numbers.insert(rank, v["n"])
        ctx.state["numbers"] = numbers[:{KEEP}]
        ctx.produce(
            self.output,
            {{"seq": v["seq"], "sent_us": v["sent_us"], "n": v["n"], "rank": rank}},
        )


def build(name, source, output, guarantee):
    pipeline = Pipeline(name)
    pipeline.source(source)
    pipeline.computation(
        "{COMPUTATION}",
        lambda: BucketSort(output),
        inputs={{source: key_by("bucket")}},
        outputs={{output: None}},
        guarantee=guarantee,
    )
    return pipeline

'''

PATCH_SOURCE = '''"""Generated by bench/latency.py as `sitecustomize.py` in a directory
first on the job's PYTHONPATH: Python imports it at the start of every process, so it acts
inside `logwheel run` (and its children) without touching framework/. It does nothing unless
LOGWHEEL_BENCH_PATCH holds JSON:

- "runner": {...}: Runner keyword arguments the command line does not expose (idle_poll_s);
- "poll_first": true: experimental loop change, the idle wait becomes consumer.poll(timeout),
  which returns at the first record, then consume(max_batch, 0) drains what is there;
- "timings_dir": times Generation.commit, the Kafka calls inside it and the loop's consume()
  calls between the bench's FLAG and FLAG.end files, and writes them there at exit.
"""
import os

if os.environ.get("LOGWHEEL_BENCH_PATCH"):
    import atexit
    import json
    import sys
    import threading
    import time
    from pathlib import Path

    from framework import collector as collector_module
    from framework import runner as runner_module

    opts = json.loads(os.environ["LOGWHEEL_BENCH_PATCH"])
    timings = {}

    def timed(name, fn):
        def call(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timings.setdefault(name, []).append(time.perf_counter() - t)

        return call

    class Proxy:
        """Delegates to a confluent-kafka client; `wrap` names methods to time."""

        def __init__(self, inner, prefix, wrap):
            self._inner = inner
            for name in wrap:
                setattr(self, name, timed(prefix + name, getattr(inner, name)))

        def __getattr__(self, name):
            return getattr(self._inner, name)

    class LoopConsumer(Proxy):
        def __init__(self, inner, poll_first):
            super().__init__(inner, "consumer.", ["commit"])
            self._poll_first = poll_first

        def consume(self, num, timeout):
            t = time.perf_counter()
            if self._poll_first and timeout > 0:
                first = self._inner.poll(timeout)
                msgs = [] if first is None else [first, *self._inner.consume(num - 1, 0)]
            else:
                msgs = self._inner.consume(num, timeout)
            kind = "consume.idle" if timeout > 0 else "consume.busy"
            timings.setdefault(kind, []).append(time.perf_counter() - t)
            timings.setdefault(kind + ".records", []).append(len(msgs))
            return msgs

    runner_init = runner_module.Runner.__init__

    def patched_runner_init(self, *args, **kwargs):
        kwargs.update(opts.get("runner", {}))
        runner_init(self, *args, **kwargs)

    runner_module.Runner.__init__ = patched_runner_init
    collector_init = collector_module.Collector.__init__

    def patched_collector_init(self, config):
        collector_init(self, config)
        wrap = ["flush", "send_offsets_to_transaction", "commit_transaction"]
        self.producer = Proxy(self.producer, "producer.", wrap)

    collector_module.Collector.__init__ = patched_collector_init
    real_consumer = runner_module.Consumer

    def make_consumer(config):
        consumer = real_consumer(config)
        if "group.instance.id" in config:  # the group member: the loop's consumer
            return LoopConsumer(consumer, bool(opts.get("poll_first")))
        return consumer

    runner_module.Consumer = make_consumer
    runner_module.Generation.commit = timed("commit", runner_module.Generation.commit)

    def summary():
        out = {}
        for name, values in timings.items():
            values = sorted(values)
            n = len(values)
            scale = 1 if name.endswith(".records") else 1000
            out[name] = {
                "n": n,
                "mean": sum(values) / n * scale,
                "p50": values[n // 2] * scale,
                "p95": values[min(n - 1, int(n * 0.95))] * scale,
                "max": values[-1] * scale,
            }
        return out

    window = {"start": time.monotonic(), "result": None}

    def measured_window():
        flag = opts.get("measure_flag")
        if not flag:
            return
        begin, end = Path(flag), Path(flag + ".end")
        while not begin.exists():
            time.sleep(0.01)
        timings.clear()
        window["start"] = time.monotonic()
        while not end.exists():
            time.sleep(0.01)
        result = summary()
        result["_window_s"] = time.monotonic() - window["start"]
        window["result"] = result

    def write_timings():
        if "--computation" not in sys.argv or not opts.get("timings_dir"):
            return  # a supervisor, or not asked for timings
        name = sys.argv[sys.argv.index("--computation") + 1]
        result = window["result"] or {
            **summary(),
            "_window_s": time.monotonic() - window["start"],
        }
        path = Path(opts["timings_dir"]) / f"timings-{name}-{os.getpid()}.json"
        path.write_text(json.dumps(result, indent=1))

    threading.Thread(target=measured_window, daemon=True).start()
    atexit.register(write_timings)
'''


# -- the input ---------------------------------------------------------------------------------


class Sender(threading.Thread):
    """Writes records at a steady rate until stopped; remembers when each was sent."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.topic, self.rate = topic, rate
        self.producer = Producer(producer_config(bootstrap))  # logwheel's own tuning
        self.sent: list[int] = []  # sent_us by seq
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error

    def _run(self) -> None:
        import random

        rng = random.Random(7)
        interval = 1 / self.rate
        start = time.monotonic()
        seq = 0
        while not self.stop.is_set():
            delay = start + seq * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            n = rng.randrange(NUMBERS)
            sent_us = time.time_ns() // 1000
            value = {"seq": seq, "n": n, "bucket": n // BUCKET_WIDTH, "sent_us": sent_us}
            self.producer.produce(
                self.topic,
                json.dumps(value, separators=(",", ":")).encode(),
                str(seq).encode(),
                timestamp=sent_us // 1000,
                headers=[(ID_HEADER, f"lat-{seq}".encode())],
            )
            self.sent.append(sent_us)
            self.producer.poll(0)
            seq += 1
        self.producer.flush(30)


class Reader(threading.Thread):
    """A read_committed consumer of the three topics noting when each record first appears."""

    def __init__(self, bootstrap: str, topics: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.hop = {topic: hop for hop, topic in topics.items()}
        self.seen: dict[str, dict[int, int]] = {hop: {} for hop in topics}
        self.duplicates: dict[str, dict[int, int]] = {hop: {} for hop in topics}
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique_name("bench-latency-reader"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5,
                "fetch.queue.backoff.ms": 0,
            }
        )
        assignment = []
        for topic in topics.values():
            meta = self.consumer.list_topics(topic, timeout=30).topics[topic]
            assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
        self.consumer.assign(assignment)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                msg = self.consumer.poll(0.1)
                if msg is None:
                    continue
                now_us = time.time_ns() // 1000
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"reader: {err}")
                    continue
                hop = self.hop[msg.topic()]
                seq = json.loads(msg.value())["seq"]
                seen = self.seen[hop]
                if seq in seen:
                    self.duplicates[hop][seq] = self.duplicates[hop].get(seq, 0) + 1
                else:
                    seen[seq] = now_us
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error
        finally:
            self.consumer.close()


# -- one measured run --------------------------------------------------------------------------


@dataclass
class Stats:
    records: int
    missing: int
    duplicates: int
    p50: float
    p95: float
    p99: float
    mean: float
    max: float
    min: float


@dataclass
class Row:
    variant: str
    guarantee: str
    rate: float
    startup_s: float  # process start until its first output was readable (median of attempts)
    cpu_pct: float  # the computation process's CPU time over the measured window, % of one core
    load: float  # 1-minute load average of the machine at the end of the measured window
    hops: dict[str, Stats]
    attempts: list[dict] = field(default_factory=list)  # per attempt: p50/p95/p99 per hop, ...
    timings: list[dict] = field(default_factory=list)  # patched variants' timings, per attempt
    note: str = ""


@dataclass
class Attempt:
    """One measured run of one variant under one guarantee."""

    startup_s: float
    cpu_pct: float
    load: float
    delays: dict[str, list[float]]  # hop -> ms, per measured record that arrived
    missing: dict[str, int]
    duplicates: dict[str, int]
    timings: dict | None


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted `values`."""
    if not values:
        return float("nan")
    rank = max(1, min(len(values), round(q / 100 * len(values) + 0.5)))
    return values[rank - 1]


def stats(delays: list[float], missing: int, duplicates: int) -> Stats:
    d = sorted(delays)
    nan = float("nan")
    return Stats(
        records=len(d),
        missing=missing,
        duplicates=duplicates,
        p50=percentile(d, 50),
        p95=percentile(d, 95),
        p99=percentile(d, 99),
        mean=sum(d) / len(d) if d else nan,
        max=d[-1] if d else nan,
        min=d[0] if d else nan,
    )


class Process:
    """The computation's process: `logwheel run --computation bucket-sort`."""

    def __init__(self, args: list[str], env: dict, log: Path) -> None:
        self.args, self.env, self.log = args, env, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "ab") as sink:
            self.proc = subprocess.Popen(
                self.args, env=self.env, stdout=sink, stderr=sink, cwd=REPO
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return "\n".join(text.splitlines()[-lines:])


class Bench:
    def __init__(self, bootstrap: str, workdir: Path, rate: float, duration: float, warmup: float):
        self.bootstrap, self.workdir = bootstrap, workdir
        self.rate, self.duration, self.warmup = rate, duration, warmup
        self.run_id = unique_name("lat")
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.topics: list[str] = []
        self.groups: list[str] = []
        self.patches = workdir / "patches"
        self.patches.mkdir()
        (self.patches / "sitecustomize.py").write_text(PATCH_SOURCE)

    def measure(self, variant: Variant, guarantee: str, attempt: int) -> Attempt:
        from framework.topics import create_topics, pipeline_topics

        slug = "".join(c if c.isalnum() else "-" for c in variant.name.lower()).strip("-")
        name = f"{self.run_id}-{slug}-{guarantee.replace('_', '-')}-{attempt}"
        module = name.replace("-", "_")
        source, output = f"{name}-numbers", f"{name}-sorted"
        (self.workdir / f"{module}.py").write_text(
            JOB_SOURCE + f"pipeline = build({name!r}, {source!r}, {output!r}, {guarantee!r})\n"
        )
        pipeline = _load(self.workdir, module)
        create_topics(self.bootstrap, pipeline)
        self.topics += [t.name for t in pipeline_topics(pipeline)]
        spec = pipeline[COMPUTATION]
        self.groups.append(spec.group)
        process, timings_path, flag = self._process(variant, module, name)
        sender = Sender(self.bootstrap, source, self.rate)
        reader = Reader(
            self.bootstrap, {"source": source, "by-key": spec.by_key(source), "output": output}
        )
        reader.start()
        try:
            launched = time.monotonic()
            process.start()
            sender.start()
            self._wait(lambda: reader.seen["output"], STARTUP_TIMEOUT_S, process, sender, reader)
            startup = time.monotonic() - launched
            time.sleep(self.warmup)
            first = len(sender.sent)
            if flag is not None:
                flag.touch()
            cpu0, t0 = _cpu_seconds(process.proc.pid), time.monotonic()
            time.sleep(self.duration)
            last = len(sender.sent)
            if flag is not None:
                flag.with_name(flag.name + ".end").touch()
            cpu_pct = 100 * (_cpu_seconds(process.proc.pid) - cpu0) / (time.monotonic() - t0)
            load = os.getloadavg()[0]
            sender.stop.set()
            sender.join(60)
            measured = range(first, last)
            self._wait(
                lambda: all(s in reader.seen["output"] for s in measured),
                DRAIN_TIMEOUT_S,
                process,
                sender,
                reader,
                fail=False,
            )
            time.sleep(0.5)  # late duplicates
        finally:
            sender.stop.set()
            process.stop()
            reader.stop.set()
            reader.join(30)
        delays, missing, duplicates = {}, {}, {}
        for hop in HOPS:
            seen, dups = reader.seen[hop], reader.duplicates[hop]
            delays[hop] = [(seen[s] - sender.sent[s]) / 1000 for s in measured if s in seen]
            missing[hop] = len(measured) - len(delays[hop])
            duplicates[hop] = sum(dups.get(s, 0) for s in measured)
        timings = None
        if timings_path is not None:
            found = sorted(timings_path.glob(f"timings-{COMPUTATION}-*.json"))
            timings = json.loads(found[-1].read_text()) if found else None
        return Attempt(startup, cpu_pct, load, delays, missing, duplicates, timings)

    def _process(self, variant: Variant, module: str, name: str):
        job = Job(
            f"{module}:pipeline",
            bootstrap=self.bootstrap,
            state_dir=self.workdir / f"state-{name}",
            path=self.workdir,
            computations=[COMPUTATION],
        )
        config = None
        if variant.kafka:
            config = self.workdir / f"{name}.toml"
            lines = [f'"{k}" = {json.dumps(v)}' for k, v in variant.kafka.items()]
            config.write_text("\n".join(["[kafka]", *lines, ""]))
        log = self.workdir / f"{name}.log"
        args = job.args + (["--config", str(config)] if config else [])
        if not variant.patched:
            return Process(args, job.env, log), None, None
        timings = self.workdir / f"timings-{name}"
        timings.mkdir()
        flag = self.workdir / f"{name}.measuring"
        patch = {
            "runner": variant.runner,
            "poll_first": variant.poll_first,
            "timings_dir": str(timings),
            "measure_flag": str(flag),
        }
        env = {
            **job.env,
            "PYTHONPATH": f"{self.patches}{os.pathsep}{job.env['PYTHONPATH']}",
            "LOGWHEEL_BENCH_PATCH": json.dumps(patch),
        }
        return Process(args, env, log), timings, flag

    @staticmethod
    def _wait(predicate, timeout, process, sender, reader, fail=True) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            for thread in (sender, reader):
                if thread.error is not None:
                    raise RuntimeError(f"{type(thread).__name__} failed: {thread.error}")
            if not process.alive():
                raise RuntimeError(f"the computation exited early\n{process.tail()}")
            if time.monotonic() > deadline:
                if fail:
                    raise RuntimeError(f"timed out after {timeout}s\n{process.tail()}")
                return
            time.sleep(0.05)

    def cleanup(self) -> None:
        """Delete what the run created on the broker (best effort)."""
        _delete(self.admin, sorted(set(self.topics)), sorted(set(self.groups)))


def _delete(admin: AdminClient, topics: list[str], groups: list[str]) -> None:
    """Delete the run's topics and consumer groups (best effort). A group whose static member
    (KIP-345) has not timed out yet is not empty and stays: it holds no data."""
    for what, names, delete in (
        ("topic", topics, admin.delete_topics),
        ("group", groups, admin.delete_consumer_groups),
    ):
        if not names:
            continue
        for name, future in delete(names).items():
            try:
                future.result(30)
            except Exception as error:  # noqa: BLE001 - best effort
                if "NON_EMPTY_GROUP" not in str(error):
                    print(f"cleanup: deleting {what} {name}: {error}", file=sys.stderr)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pool(variant: Variant, guarantee: str, rate: float, attempts: list[Attempt]) -> Row:
    """One row over every attempt: percentiles of all their records together."""
    hops = {
        hop: stats(
            [d for a in attempts for d in a.delays[hop]],
            sum(a.missing[hop] for a in attempts),
            sum(a.duplicates[hop] for a in attempts),
        )
        for hop in HOPS
    }
    per_attempt = []
    for a in attempts:
        entry = {"startup_s": a.startup_s, "cpu_pct": a.cpu_pct, "load": a.load}
        for hop in HOPS:
            s = stats(a.delays[hop], a.missing[hop], a.duplicates[hop])
            entry[hop] = {"p50": s.p50, "p95": s.p95, "p99": s.p99, "records": s.records}
        per_attempt.append(entry)
    return Row(
        variant=variant.name,
        guarantee=guarantee,
        rate=rate,
        startup_s=statistics.median(a.startup_s for a in attempts),
        cpu_pct=statistics.mean(a.cpu_pct for a in attempts),
        load=statistics.mean(a.load for a in attempts),
        hops=hops,
        attempts=per_attempt,
        timings=[a.timings for a in attempts if a.timings],
        note=variant.note,
    )


def _load(directory: Path, module: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(module, directory / f"{module}.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded.pipeline


# -- the whole benchmark -----------------------------------------------------------------------


def run(
    bootstrap: str,
    variants: Sequence[Variant],
    guarantees: Sequence[str],
    rate: float,
    duration: float,
    warmup: float,
    repeat: int,
    keep: bool,
) -> list[Row]:
    """Every variant under every guarantee, `repeat` times, interleaved so that a change of
    the machine's load touches them all alike; one pooled row per (variant, guarantee)."""
    workdir = Path(tempfile.mkdtemp(prefix="logwheel-latency-"))
    bench = Bench(bootstrap, workdir, rate, duration, warmup)
    attempts: dict[tuple[str, str], list[Attempt]] = {}
    try:
        for attempt in range(repeat):
            for variant in variants:
                for guarantee in guarantees:
                    a = bench.measure(variant, guarantee, attempt)
                    attempts.setdefault((variant.name, guarantee), []).append(a)
                    out = stats(a.delays["output"], a.missing["output"], 0)
                    print(
                        f"  {variant.name:22} {guarantee:14} run {attempt + 1}: output p50 "
                        f"{out.p50:6.1f} ms, p95 {out.p95:6.1f}, p99 {out.p99:6.1f} "
                        f"({out.records} records, {out.missing} missing; startup "
                        f"{a.startup_s:.1f}s, cpu {a.cpu_pct:.0f}%, load {a.load:.1f})",
                        flush=True,
                    )
    finally:
        if keep:
            print(f"kept {workdir} (logs, state, timings) and the run's topics")
        else:
            bench.cleanup()
            shutil.rmtree(workdir, ignore_errors=True)
    return [
        pool(v, g, rate, attempts[(v.name, g)])
        for v in variants
        for g in guarantees
        if (v.name, g) in attempts
    ]


def table(rows: Sequence[Row]) -> str:
    head = (
        f"{'variant':22} {'guarantee':14} {'hop':7} {'records':>7} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'p99 ms':>7} {'max ms':>7} {'paper p50/p95':>13} {'x p50':>6} "
        f"{'x p95':>6} {'cpu %':>6} {'load':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        for hop in HOPS:
            s = r.hops[hop]
            paper, ratios = "", f"{'':13}"
            if hop == "output":
                p = PAPER[r.guarantee]
                paper = f"{p['p50']:g}/{p['p95']:g}"
                ratios = f"{s.p50 / p['p50']:6.1f} {s.p95 / p['p95']:6.1f}"
                ratios += f" {r.cpu_pct:6.0f} {r.load:5.1f}"
            extra = f" ({s.missing} missing)" if s.missing else ""
            extra += f" ({s.duplicates} duplicates)" if s.duplicates else ""
            lines.append(
                f"{r.variant:22} {r.guarantee:14} {hop:7} {s.records:7d} {s.p50:7.1f} "
                f"{s.p95:7.1f} {s.p99:7.1f} {s.max:7.1f} {paper:>13} {ratios}{extra}"
            )
    return "\n".join(lines)


def timings_table(rows: Sequence[Row]) -> str:
    """Patched variants' timings of the runner's commit and its Kafka calls (measured window)."""
    names = [
        "commit",
        "producer.flush",
        "producer.send_offsets_to_transaction",
        "producer.commit_transaction",
        "consumer.commit",
        "consume.idle",
    ]
    head = f"{'variant':22} {'guarantee':14} {'call':38} {'per s':>6} {'mean ms':>8} {'p95 ms':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if not r.timings:
            continue
        timings = r.timings[-1]  # the last attempt's
        window = timings.get("_window_s") or 1
        for name in names:
            t = timings.get(name)
            if t:
                lines.append(
                    f"{r.variant:22} {r.guarantee:14} {name:38} {t['n'] / window:6.0f} "
                    f"{t['mean']:8.2f} {t['p95']:7.2f}"
                )
        idle = timings.get("consume.idle.records")
        if idle:
            lines.append(
                f"{r.variant:22} {r.guarantee:14} {'records per idle consume()':38} "
                f"{'':6} {idle['mean']:8.2f}"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="record delay through one differently-keyed stage (MillWheel §8.1)"
    )
    parser.add_argument("--quick", action="store_true", help="a reduced run (for make test)")
    parser.add_argument("--rate", type=float, help=f"records/s (default {FULL['rate']:g})")
    parser.add_argument(
        "--duration", type=float, help=f"measured seconds of sends (default {FULL['duration']:g})"
    )
    parser.add_argument(
        "--warmup", type=float, help=f"seconds after the first output (default {FULL['warmup']:g})"
    )
    parser.add_argument(
        "--guarantee", action="append", choices=GUARANTEES, help="default: both, in turn"
    )
    parser.add_argument(
        "--variant",
        action="append",
        choices=list(VARIANTS),
        help="run these variants (repeatable; default: 'default' only)",
    )
    parser.add_argument("--explore", action="store_true", help="run every variant")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each, interleaved; percentiles pooled"
    )
    parser.add_argument("--bootstrap", help="else LOGWHEEL_BOOTSTRAP, else the embedded broker")
    parser.add_argument("--out", type=Path, help="results JSON (default under bench/results/)")
    parser.add_argument("--keep", action="store_true", help="keep topics, logs and state")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    rate = args.rate or size["rate"]
    duration = args.duration or size["duration"]
    warmup = args.warmup if args.warmup is not None else size["warmup"]
    names = list(VARIANTS) if args.explore else (args.variant or ["default"])
    variants = [VARIANTS[n] for n in names]
    guarantees = args.guarantee or list(GUARANTEES)
    bootstrap = bootstrap_from(args.bootstrap)

    started = time.monotonic()
    print(
        f"latency: {COMPUTATION} (key_by -> .by-key -> state -> output) at {rate:g} records/s, "
        f"{warmup:g}s warm-up + {duration:g}s measured, on {bootstrap} "
        f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    rows = run(bootstrap, variants, guarantees, rate, duration, warmup, args.repeat, args.keep)
    print()
    print("delay = visible to a read_committed reader - send time (ms); hops: source = the")
    print("input topic (Kafka alone), by-key = after the repartition commit, output = end")
    print("to end. x p50 / x p95 = output over MillWheel §8.1 (3.6/30 ms without, 33.7/93.8")
    print("with strong productions + exactly-once).")
    print(table(rows))
    timings = timings_table(rows)
    if timings:
        print()
        print("runner timings (patched variants, last run, measured window only):")
        print(timings)

    suffix = ".quick" if args.quick else (".explore" if args.explore else "")
    out = args.out or RESULTS / f"latency{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    elapsed = round(time.monotonic() - started, 1)
    report = {
        "benchmark": "latency",
        "paper": "MillWheel §8.1 (Figure 13)",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv[1:] if argv is None else argv),
        "rate": rate,
        "duration_s": duration,
        "warmup_s": warmup,
        "repeat": args.repeat,
        "bootstrap": bootstrap,
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m_at_start": os.getloadavg()[0],
            "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0],
        },
        "method": (
            "plain producer -> source (key A) -> bucket-sort with key_by(bucket) via .by-key "
            "-> output; delay = first visibility to a read_committed reader - sent_us taken "
            "before produce(); records sent in the warm-up after the first output excluded"
        ),
        "paper_ms": PAPER,
        "variants": {v.name: asdict(v) for v in variants},
        "rows": [asdict(r) for r in rows],
        "elapsed_s": elapsed,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out} ({elapsed}s)")
    missing = sum(r.hops["output"].missing for r in rows)
    if missing:
        print(f"WARNING: {missing} measured records never reached the output", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
