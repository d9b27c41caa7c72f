"""Windowed count: a tumbling 60 s count per key, final results only, in logwheel and its peers.

What is measured: one windowed stage. Its input is a topic of 4 partitions holding
`--records` JSON records {"key": k} keyed by k (Zipf-distributed over `--keys` keys, Kafka's
murmur2 partitioner), their Kafka timestamps spread evenly, in order, over `--minutes` minutes
of event time (one tumbling window each); the stage counts the records per key and window and
writes each (key, window) once, when the window closes. Contenders, run one after the other on
the same broker in the same run, each over its own copy of the same input (same records, same
partitions, same order) with a consumer group and an output topic of its own:

- `logwheel exactly_once` / `logwheel at_least_once`: `logwheel run` (tests.support.Job) of
  `pipeline.windowed("counts", inputs={events: None}, window=windows.Tumbling(size_ms=60_000),
  aggregate=windows.Count(), emit="final", guarantee=...)` over a source whose watermark is
  `BoundedOutOfOrderness(ms=0)`: the highest timestamp read on a partition, as the peers'
  stream time (the input is in order, so no record is late in any contender);
- peers, with `--peers` or LOGWHEEL_BENCH_PEERS=1 (make bench sets it), each in a pinned
  virtualenv or build of its own: `quix exactly_once` / `quix at_least_once` (bench/peers.py),
  bench/peers/quix_windowed_count.py, `tumbling_window(duration_ms=60_000).count().final()` in
  Quix Streams (grace 0; its default closing strategy, per key: a key's windows close when
  that key's own records pass them), configured as Quix's docs recommend (processing_guarantee,
  its 5 s commit interval); `quix ... closing=partition`, the same with
  `final(closing_strategy="partition")`, windows closed by the partition's stream time as
  logwheel's watermark closes them; `kafka-streams exactly_once` / `kafka-streams
  at_least_once`, the JVM reference: the windowed-count oracle of the tests
  (tests/integration/java/windowed-count, Maven, kafka-streams pinned to the broker's version):
  `groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(60 s, 0)).count()` in a persistent
  (RocksDB, changelogged) window store, `suppress(untilWindowCloses)`, results in logwheel's
  shape; processing.guarantee exactly_once_v2 or at_least_once, read_committed input,
  commit.interval.ms 100 in both (Kafka Streams' default for exactly-once; its at-least-once
  default is 30 s), all else default. It counts the input values without decoding them (byte
  arrays), where logwheel and Quix decode each value's JSON.

Windows close only when time passes them, so the input ends with closing records: one per key
(every key of the vocabulary) and one per partition, all at a time two windows past the last
data window. They advance every partition's stream time and watermark, and every key's own
time (Quix's per-key closing), past every data window; their own windows never close and are
left out of the check. The check, for every contender (bench/verify.py), once it has stopped
and its output topic is read to its end: the set of (key, window start, count) it wrote must
equal the reference counted by brute force from the input (the warm-up records' windows
included); `missing` are expected results not written (a wrong count is missing and
unexpected), `unexpected` results written but not expected, `duplicated` results written more
than once, `late` results readable only after the run's time was taken. A mismatch fails the
benchmark (exit 1) and no figure is printed.

Timing, as bench/throughput.py's, with the input gated by a transaction so that process
startup (imports, group join, restore) is outside the measurement:

1. warm-up records are produced and committed: per partition a record of key `warmup-P` at the
   start of the first window and one two windows later, which closes the first window for
   every contender; then the input (data and closing records) is produced in one transaction
   left open, invisible to read_committed readers;
2. the contender's process starts; once its result of each partition's first warm-up window is
   readable (read_committed) it is running and idle at the open transaction: `startup s`;
3. the input transaction commits (t0); `seconds` runs from t0 until every expected result is
   readable read_committed (or nothing new came for `QUIET_S`: a liveness bound, after
   which the check finds what is missing or late).

records/s = input records (data and closing records) / seconds; `CPU us/rec` is the CPU time
(user + system, all threads, from /proc) of the contender's process tree between t0 and the
last result, per input record: it moves much less than wall time when other processes share
the machine, so compare contenders by it. `CPU/quix` and `rec/s vs quix` are logwheel's over
Quix Streams' (default closing) in the same guarantee. Event time starts a day before the run
(never older than the broker's retention), aligned to a minute.

    python bench/windowed.py [--records N] [--keys K] [--minutes M] [--quick] [--repeat R]
                             [--peers] [--contender NAME]... [--bootstrap H:P] [--out F]
"""

from __future__ import annotations

import collections
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, peers, verify  # noqa: E402
from framework import BoundedOutOfOrderness, Pipeline, windows  # noqa: E402
from tests.integration import kafka_streams_oracle  # noqa: E402
from tests.support import Job  # noqa: E402

FULL = {"records": 1_000_000, "keys": 1_000, "minutes": 60, "repeat": 1}
QUICK = {"records": 5_000, "keys": 50, "minutes": 5, "repeat": 1}
QUICK_ARGS = ["--quick"]
"""What `bench/run_all.py --quick` passes: a reduced run."""

PARTITIONS = 4
SIZE_MS = 60_000  # the tumbling window
CONTENDERS = {
    "logwheel exactly_once": "exactly_once",
    "logwheel at_least_once": "at_least_once",
}
PEERS = {
    "quix exactly_once": ("quix", "exactly-once", "key"),
    "quix at_least_once": ("quix", "at-least-once", "key"),
    "quix exactly_once closing=partition": ("quix", "exactly-once", "partition"),
    "quix at_least_once closing=partition": ("quix", "at-least-once", "partition"),
    "kafka-streams exactly_once": ("kafka-streams", "exactly_once_v2", None),
    "kafka-streams at_least_once": ("kafka-streams", "at_least_once", None),
}
"""Peers, measured with --peers or LOGWHEEL_BENCH_PEERS=1: (peer, its name of the guarantee,
Quix's closing strategy)."""
QUIX_PROGRAM = common.BENCH / "peers" / "quix_windowed_count.py"
QUIET_S = 60.0  # no new result for this long before all are in: the contender is done
RUN_TIMEOUT_S = 900.0

Result = tuple[str, int, int]
"""(key, window start, count): one window's final result."""


def windowed_count(name: str, events: str, counts: str, guarantee: str) -> Pipeline:
    """The pipeline a logwheel contender runs: the tumbling count alone over a pre-filled
    topic whose watermark is the highest timestamp read (the peers' stream time)."""
    pipeline = Pipeline(name, partitions=PARTITIONS)
    pipeline.source(events, watermark=BoundedOutOfOrderness(ms=0))
    pipeline.windowed(
        "counts",
        inputs={events: None},
        window=windows.Tumbling(size_ms=SIZE_MS),
        aggregate=windows.Count(),
        output=counts,
        emit="final",
        guarantee=guarantee,
    )
    return pipeline


# -- the input and its reference -------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One input record: its key, event time and partition (None: the key's, murmur2)."""

    key: str
    timestamp: int
    partition: int | None = None

    def value(self) -> bytes:
        return json.dumps({"key": self.key}).encode()


@dataclass(frozen=True)
class Input:
    """The records every contender reads, and what it must write for them."""

    warmup: list[Event]  # committed before the contender starts
    events: list[Event]  # the measured input, in one transaction: data, then closing records
    closing: int  # how many of `events` (the last ones) only advance time
    expected: collections.Counter[tuple[str, int]]  # (key, window start) -> count

    def results(self) -> set[Result]:
        """The final result of every window that must close: (key, start, count)."""
        return {(key, start, n) for (key, start), n in self.expected.items()}


def zipf_keys(n: int, keys: int, seed: int = 1) -> list[str]:
    """`n` keys drawn from `keys` keys with Zipf (s=1) frequencies."""
    rng = random.Random(seed)
    vocabulary = [f"k{i}" for i in range(keys)]
    return rng.choices(vocabulary, weights=[1 / (rank + 1) for rank in range(keys)], k=n)


def window_start(timestamp: int) -> int:
    return timestamp - timestamp % SIZE_MS


def make_input(records: int, keys: int, minutes: int, base: int | None = None) -> Input:
    """The warm-up records in the windows starting at `base` (default: a day ago, aligned to a
    window) and two windows later; `records` data records over `keys` keys, in time order over
    the `minutes` windows that follow; the closing records two windows after the last data
    window; and the reference, counted by brute force over warm-up and data records."""
    if base is None:
        base = window_start(int(time.time() * 1000) - 86_400_000)
    warmup = [
        Event(f"warmup-{p}", base + w * SIZE_MS, p) for p in range(PARTITIONS) for w in (0, 2)
    ]
    start, span = base + 3 * SIZE_MS, minutes * SIZE_MS
    data = [
        Event(key, start + i * span // records) for i, key in enumerate(zipf_keys(records, keys))
    ]
    end = start + span + 2 * SIZE_MS
    closing = [Event(f"k{i}", end) for i in range(keys)]
    closing += [Event(f"warmup-{p}", end, p) for p in range(PARTITIONS)]
    expected = collections.Counter((e.key, window_start(e.timestamp)) for e in warmup + data)
    return Input(warmup, data + closing, len(closing), expected)


def result(msg) -> Result:
    """One written result as (key, start, count), from logwheel's value {"key", "start", "end",
    "value"} or Quix's {"start", "end", "value"} keyed by the key."""
    key, decoded = msg.key(), json.loads(msg.value())
    name = decoded.get("key", key.decode() if key is not None else None)
    return name, decoded["start"], decoded["value"]


# -- one run of one contender ----------------------------------------------------------------


class Gate(common.Gate):
    """The input topic: warm-up records readable at once, the measured input only after
    `open()`."""

    def __init__(self, bootstrap: str, topic: str, data: Input) -> None:
        super().__init__(bootstrap)
        for event in data.warmup:
            self._send(topic, event)
        self.warmed()
        for event in data.events:
            self._send(topic, event)
        self.producer.flush(120)

    def _send(self, topic: str, event: Event) -> None:
        kwargs = {} if event.partition is None else {"partition": event.partition}
        self.send(topic, event.value(), event.key.encode(), timestamp=event.timestamp, **kwargs)


class Results:
    """A read_committed reader of every partition of a contender's output topic, counting the
    results as they become readable (what a run is timed by; `verify.read` checks them)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = common.follow(bootstrap, [topic], **{"fetch.wait.max.ms": 10})
        self.seen = 0

    def wait(self, count: int, timeout: float, healthy: Callable[[], None]) -> bool:
        """Read until `count` results in all (`healthy` raises if the contender failed);
        False if nothing new came for `QUIET_S` before (some will never come)."""
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while self.seen < count:
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(f"{self.topic}: {self.seen}/{count} results after {timeout}s")
            if now - last > QUIET_S:
                return False
            healthy()
            if self._read(0.05):
                last = time.monotonic()
        return True

    def _read(self, timeout: float) -> int:
        got = len(common.records(self.consumer.consume(10_000, timeout)))
        self.seen += got
        return got

    def close(self) -> None:
        self.consumer.close()


def start(ws: common.Workspace, contender: str, name: str, source: str, output: str) -> Job:
    """The contender's process over `source`, writing `output` (topics created here)."""
    if contender in CONTENDERS:
        build = "bench.windowed:windowed_count"
        pipeline = ws.pipeline(build, name, source, output, CONTENDERS[contender])
        return ws.job(pipeline, "counts")
    peer, guarantee, closing = PEERS[contender]
    ws.create_topics([source, output], PARTITIONS)
    ws.groups.append(name)
    if peer == "kafka-streams":  # the tests' oracle (built with Maven on first use)
        state = ws.dir / f"state-{name}"
        job = Job(peer, bootstrap=ws.bootstrap, state_dir=state, path=ws.dir)
        job.args = kafka_streams_oracle.command() + [ws.bootstrap, source, output, name]
        job.args += [str(SIZE_MS), "0", guarantee, str(state)]  # grace 0; until SIGTERM
        return job
    return ws.peer_job(peer, name, source, output, guarantee, QUIX_PROGRAM, closing=closing)


def measure(ws: common.Workspace, data: Input, contender: str, attempt: int) -> dict:
    """One run of one contender: startup_s, seconds, records, cpu_s, and the check."""
    slug = contender.replace(" ", "-").replace("_", "-").replace("=", "-")
    name = f"{ws.run}-{slug}-{attempt}"
    source, output = f"{name}-events", f"{name}-out"
    job = start(ws, contender, name, source, output)
    gate = Gate(ws.bootstrap, source, data)
    results = Results(ws.bootstrap, output)
    expected = data.results()
    try:
        launched = time.monotonic()
        job.start()
        if not results.wait(PARTITIONS, common.STARTUP_TIMEOUT_S, lambda: common.check(job)):
            raise RuntimeError(f"{contender}: no warm-up results\n{job.output()[-3000:]}")
        startup = time.monotonic() - launched
        cpu0, t0 = common.cpu_seconds(job.proc.pid), time.monotonic()
        gate.open()
        complete = results.wait(len(expected), RUN_TIMEOUT_S, lambda: common.check(job))
        done, cpu1 = time.monotonic(), common.cpu_seconds(job.proc.pid)
        if not complete:
            done -= QUIET_S  # it stopped writing then
        rss = common.peak_rss_mb(job.proc.pid)
    finally:
        job.stop()
        results.close()
        gate.close()
        # the peers' own topics (changelogs, repartitions) are named after their group
        ws.topics += [t for t in ws.admin.list_topics(timeout=30).topics if name in t]
    written = verify.read(ws.bootstrap, [output], result)
    short = max(0, len(expected) - results.seen)
    return {
        "startup_s": startup,  # process start until its warm-up results were readable
        "seconds": done - t0,  # input committed until every result was readable
        "records": len(data.events),
        "cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,  # all its threads
        "peak_rss_mb": rss,
        "results": sum(written.values()),
        **verify.compare(expected, written, short_at_end=short),
    }


def row(contender: str, runs: list[dict]) -> dict:
    """A contender's medians over its runs, and the worst run's check."""
    return {
        **common.medians(contender, runs[0]["records"], runs),
        **verify.worst(runs),
        "runs": runs,
    }


def describe(t: dict) -> str:
    if not verify.passed(t):
        return f"{t['results']} results: {verify.describe(t)}"
    cpu = "-" if t["cpu_s"] is None else f"{t['cpu_s']:.2f}s"
    return (
        f"{t['seconds']:6.2f}s ({t['records'] / t['seconds']:9,.0f} records/s; startup "
        f"{t['startup_s']:.2f}s; CPU {cpu}; {t['results']} results {verify.describe(t)})"
    )


def run(args: object, contenders: Sequence[str]) -> tuple[Input, list[dict]]:
    """Every contender `repeat` times over the same input; one row per contender, logwheel's
    with its ratios to Quix Streams' (default closing) in the same guarantee."""
    data = make_input(args.records, args.keys, args.minutes)
    print(
        f"input: {len(data.events) - data.closing} records and {data.closing} closing records,"
        f" {args.keys} keys, {args.minutes} windows, {PARTITIONS} partitions;"
        f" {len(data.expected)} windows to close"
    )
    with common.Workspace(args.bootstrap, "win", args.keep) as ws:
        runs = common.interleave(
            args.repeat, contenders, lambda c, n: measure(ws, data, c, n), describe
        )
    rows = [row(c, runs[c]) for c in contenders]
    by = {r["contender"]: r for r in rows}
    for r in rows:
        r["windows"] = len(data.expected)
        quix = by.get("quix " + r["contender"].split()[1]) if r["contender"] in CONTENDERS else None
        cpu, quix_cpu = r["cpu_us_per_record"], quix and quix["cpu_us_per_record"]
        r["cpu_vs_quix"] = cpu / quix_cpu if cpu and quix_cpu else None
        r["vs_quix"] = r["records_per_s"] / quix["records_per_s"] if quix else None
    return data, rows


COLUMNS = [("contender", -36), ("records", 9), ("seconds", 8), ("records/s", 10)]
COLUMNS += [("CPU us/rec", 10), ("CPU/quix", 8), ("rec/s vs quix", 13), ("startup s", 9)]
COLUMNS += [("RSS MB", 7)]


def table(rows: Sequence[dict]) -> str:
    f = common.fmt
    return common.table(
        COLUMNS,
        (
            [r["contender"], r["records"], f(r["seconds"], ".2f"), f(r["records_per_s"], ",.0f")]
            + [f(r["cpu_us_per_record"], ".1f"), f(r["cpu_vs_quix"], ".2f")]
            + [f(r["vs_quix"], ".2f"), f(r["startup_s"], ".2f"), f(r["peak_rss_mb"], ".0f")]
            for r in rows
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("tumbling 60 s count per key: logwheel beside its peers", FULL, QUICK)
    parser.add_argument(
        "--contender",
        action="append",
        choices=[*CONTENDERS, *PEERS],
        help="measure only these contenders (repeatable)",
    )
    peers.add_option(parser, "also the peers, each in a virtualenv of its own")
    args = parser.parse(argv)
    contenders = list(args.contender or CONTENDERS)
    contenders += [p for p in PEERS if args.peers and p not in contenders]

    print(f"windowed: a tumbling 60 s count per key, {args.records} records, on {args.bootstrap}")
    data, rows = run(args, contenders)
    failed = verify.failures(rows)
    if not failed:
        print()
        print(table(rows))
    common.write_results(
        "windowed",
        args,
        stage="tumbling 60 s count per key, emit final",
        records=args.records,
        keys=args.keys,
        minutes=args.minutes,
        partitions=PARTITIONS,
        windows=len(data.expected),
        closing_records=data.closing,
        repeat=args.repeat,
        method=(
            "input in event-time order, ending with a closing record per key and per partition"
            " two windows past the last; pre-filled in an open transaction; the contender is"
            " started and warmed up (startup_s); seconds = from committing the input until"
            " every expected result is readable read_committed; results checked against a"
            " brute-force reference"
        ),
        rows=rows,
        failed=failed,
    )
    return verify.report(failed)


if __name__ == "__main__":
    sys.exit(main())
