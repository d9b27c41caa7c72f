"""Throughput of one stateful stage — wordcount's CountWords — beside a bare Kafka loop.

What is measured: the count-words stage alone. Its input is a pre-filled `words` topic (JSON
{"word": w} keyed by the word, 4 partitions, one record per word, Zipf-distributed over a
vocabulary of 10,000 words); it writes one output record per input record. Contenders, run one
after the other on the same broker in the same run, each over its own copy of the same input
(same records, same partitions) with a consumer group and an output topic of its own:

- `bare loop`: bench/bare_loop.py, a confluent-kafka consume→produce loop (read_committed
  consumer, plain producer, the same client tuning as logwheel) copying key and value bytes;
- `hand-written exactly_once`: bench/floor_loop.py, CountWords' per-record work written by hand
  on confluent-kafka with what logwheel's guarantees cost per record (the state document
  encoded, an output id in a header, delivered offsets noted, transactions paced as logwheel
  paces them) and none of the framework: the floor a Python framework could reach;
- `logwheel exactly_once` / `logwheel at_least_once`: `logwheel run` (tests.support.Job) of a
  pipeline holding only CountWords: decode JSON, count per key in state, encode Avro
  `wordcount.WordCount`, write the changelog, commit;
- `logwheel exactly_once +metrics`: the same with `--metrics-port`, its endpoint scraped once a
  second while it runs (issue 10: within 3% of exactly_once without);
- `logwheel exactly_once wire`: the same pipeline against a Schema Registry (an embedded one,
  started for the run), so `wordcount.WordCount` is written in the Confluent wire format instead
  of single-object encoding (issue 22: CPU per record within 10% of exactly_once);
- `logwheel exactly_once +dedup`: the same with `dedup=Dedup()` on CountWords, every record a
  new id (the common case: the Bloom filter answers, no store read; one id journal record
  each) (issue 26: CPU per record at most 15% over exactly_once);
- peers, with `--peers` or LOGWHEEL_BENCH_PEERS=1 (make bench sets it), each in a pinned
  virtualenv of its own (bench/peers.py): `quix exactly_once` / `quix at_least_once`,
  bench/peers/quix_count_words.py, the same count per word in Quix Streams' RocksDB state with
  one JSON output per input, configured as Quix's docs recommend (processing_guarantee, all
  else default: note its 5 s commit interval, which is when exactly-once outputs appear);
  `kafka-streams exactly_once` / `kafka-streams at_least_once`, the JVM reference:
  bench/kafka-streams (Maven), a persistent (RocksDB, changelogged) store counting per word,
  one JSON output per input (it does not parse the input JSON: the key is the word),
  processing.guarantee exactly_once_v2 or at_least_once, all else Kafka Streams' defaults
  (commit.interval.ms 100 ms exactly-once, 30 s at-least-once) but read_committed input.

Every run is checked: the outputs per word (by key) against the input's count of the word;
`lost` and `duplicated` are the worst run's sums over words (exactly-once must show 0 and 0).

Timing, identical for every contender, with the input gated by a transaction so that process
startup (imports, group join, restore) is outside the measurement without being estimated:

1. one warm-up record per partition is produced and committed; then all the input records are
   produced in one transaction that is left open — invisible to read_committed readers;
2. the contender's process starts; once its outputs of the warm-up records are readable
   (read_committed) it is running and idle at the open transaction: that is `startup s`;
3. the input transaction commits (t0): the whole input becomes readable at once, as a
   pre-filled topic; `seconds` runs from t0 until every output is readable read_committed.

records/s = input records / seconds, the median of `--repeat` interleaved rounds; ratio =
records/s over the bare loop's, `vs lw eos` over logwheel exactly_once's. `first s` is when
the first output became readable after t0. `CPU us/rec` is the CPU time (user + system, all
threads, from /proc) the contender's process used between t0 and the last output, per input
record; `CPU ratio` is the bare loop's over the contender's. CPU time moves much less than wall
time when other processes compete for the machine (the broker shares it anyway), so compare
runs by it; for wall-time figures run on an otherwise idle machine with `--repeat` (median).

    python bench/throughput.py [--records N] [--quick] [--repeat R] [--bootstrap H:P] [--out F]
"""

from __future__ import annotations

import collections
import contextlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, peers  # noqa: E402
from framework import Dedup, Pipeline  # noqa: E402
from framework.jvm.process import any_free_port  # noqa: E402
from jobs.wordcount import CountWords  # noqa: E402
from tests.support import Job  # noqa: E402

FULL = {"records": 1_000_000, "repeat": 3}
QUICK = {"records": 20_000, "repeat": 1}
QUICK_ARGS = ["--quick"]
"""What `bench/run_all.py --quick` passes: a reduced run."""

PARTITIONS = 4
VOCABULARY = 10_000
CONTENDERS = {
    "bare loop": "bare",
    "hand-written exactly_once": "floor",
    "logwheel exactly_once": "exactly_once",
    "logwheel at_least_once": "at_least_once",
    "logwheel exactly_once +metrics": "exactly_once+metrics",
    "logwheel exactly_once wire": "exactly_once+wire",
    "logwheel exactly_once +dedup": "exactly_once+dedup",
}
PEERS = {
    "quix exactly_once": ("quix", "exactly-once"),
    "quix at_least_once": ("quix", "at-least-once"),
    "kafka-streams exactly_once": ("kafka-streams", "exactly_once_v2"),
    "kafka-streams at_least_once": ("kafka-streams", "at_least_once"),
    "faust at_least_once": ("faust", "at_least_once"),
}
"""Peers (bench/peers.py), measured with --peers or LOGWHEEL_BENCH_PEERS=1."""
SHORTER = {"faust at_least_once": 20}
"""Contenders about 20x slower than the rest read 1/N of the input (the first records), so
that a full run stays within make bench's time: per-record figures stay comparable."""
BARE = "bare loop"
DRAIN_S = 1.0  # after the last expected output, how long duplicates are looked for
RUN_TIMEOUT_S = 600.0


def count_words(
    name: str,
    words: str,
    counts: str,
    guarantee: str,
    registry: str | None = None,
    dedup: bool = False,
) -> Pipeline:
    """The pipeline a logwheel contender runs: CountWords alone over a pre-filled topic; with
    a `registry`, its output in the Confluent wire format; with `dedup`, deduplicating."""
    return (
        Pipeline(name, partitions=PARTITIONS, registry=registry)
        .source(words)
        .computation(
            "count-words",
            lambda: CountWords(counts),
            inputs={words: None},
            outputs={counts: "wordcount.WordCount"},
            guarantee=guarantee,
            dedup=Dedup() if dedup else None,
        )
    )


def zipf_words(n: int, seed: int = 1) -> list[str]:
    """`n` words drawn from `VOCABULARY` words with Zipf (s=1) frequencies, like text."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(VOCABULARY)]
    weights = [1 / (rank + 1) for rank in range(VOCABULARY)]
    return rng.choices(vocabulary, weights=weights, k=n)


class Gate(common.Gate):
    """The input topic: a warm-up record per partition readable at once, the words only after
    `open()`."""

    def __init__(self, bootstrap: str, topic: str, words: Sequence[str]) -> None:
        super().__init__(bootstrap)
        for p in range(PARTITIONS):
            self._send(topic, f"warmup-{p}", partition=p)
        self.warmed()
        for word in words:
            self._send(topic, word)
        self.producer.flush(60)

    def _send(self, topic: str, word: str, **kwargs: int) -> None:
        self.send(topic, json.dumps({"word": word}).encode(), word.encode(), **kwargs)


class Outputs:
    """A read_committed reader of every partition of an output topic, counting records."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = common.follow(bootstrap, [topic], **{"fetch.wait.max.ms": 10})
        self.seen = 0
        self.per_key: collections.Counter[bytes | None] = collections.Counter()
        self.watch: set[bytes] = set()  # keys whose last value is kept (`last_values`)
        self.values: dict[bytes, bytes | None] = {}

    def wait(self, count: int, timeout: float, healthy: Callable[[], None]) -> float | None:
        """Read until `count` records in all (`healthy` raises if the contender failed);
        returns the monotonic time the first new record arrived (None if none was needed)."""
        first, deadline = None, time.monotonic() + timeout
        while self.seen < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.topic}: {self.seen}/{count} after {timeout}s")
            healthy()
            got = self._read(0.02)
            if got and first is None:
                first = time.monotonic()
        return first

    def _read(self, timeout: float) -> int:
        msgs = common.records(self.consumer.consume(10_000, timeout))
        self.per_key.update(m.key() for m in msgs)
        if self.watch:
            self.values.update((m.key(), m.value()) for m in msgs if m.key() in self.watch)
        self.seen += len(msgs)
        return len(msgs)

    def last_values(self, decode: Callable[[bytes | None], object]) -> dict[bytes, object]:
        """The last value read of each watched key, decoded."""
        return {key: decode(value) for key, value in self.values.items()}

    def verify(self, words: Sequence[str]) -> dict[str, int]:
        """Read on for `DRAIN_S`, then compare the outputs per word with the input: one output
        per input record of the word (the warm-up words included). `lost` counts inputs
        without an output, `duplicated` outputs beyond the inputs, summed over words."""
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            self._read(0.05)
        expected = collections.Counter(w.encode() for w in words)
        expected.update(f"warmup-{p}".encode() for p in range(PARTITIONS))
        lost = sum((expected - self.per_key).values())
        duplicated = sum((self.per_key - expected).values())
        return {"lost": lost, "duplicated": duplicated}

    def close(self) -> None:
        self.consumer.close()


def start(ws: common.Workspace, kind: str, name: str, source: str, output: str) -> Job:
    """The contender's process over `source`, writing `output` (topics created here)."""
    if kind.startswith("peer:"):
        peer, guarantee = kind.split(":")[1:]
        ws.create_topics([source, output], PARTITIONS)
        ws.groups.append(name)
        ws.topics += {  # the peer's own changelog (and the like), named by its rules
            "kafka-streams": [f"{name}-counts-changelog"],
            "faust": [f"{name}-counts-changelog", f"{name}-__assignor-__leader"],
        }.get(peer, [f"changelog__{name}--{source}--default"])
        return ws.peer_job(peer, name, source, output, guarantee)
    if kind not in CONTENDERS.values():
        raise ValueError(f"unknown contender kind {kind!r}")
    if kind not in ("bare", "floor"):
        guarantee, _, extra = kind.partition("+")
        registry = ws.registry() if extra == "wire" else None
        pipeline = ws.pipeline(
            "bench.throughput:count_words", name, source, output, guarantee, registry,
            extra == "dedup",
        )  # fmt: skip
        job = ws.job(pipeline, "count-words")
        if extra == "metrics":
            job.args += ["--metrics-port", str(any_free_port())]
        return job
    ws.create_topics([source, output], PARTITIONS)
    ws.groups.append(name)
    job = Job(kind, bootstrap=ws.bootstrap, state_dir=ws.dir / f"state-{name}", path=ws.dir)
    script = common.BENCH / ("bare_loop.py" if kind == "bare" else "floor_loop.py")
    job.args = [sys.executable, str(script), "--bootstrap", ws.bootstrap]
    job.args += ["--input", source, "--output", output, "--group", name]
    if kind == "floor":
        ws.create_topics([f"{name}-changelog"], PARTITIONS)
        job.args += ["--changelog", f"{name}-changelog"]
    return job


def measure(ws: common.Workspace, words: list[str], contender: str, attempt: int) -> dict:
    """One run of one contender: startup_s, seconds, first_s, records, cpu_s."""
    kind = CONTENDERS.get(contender) or "peer:" + ":".join(PEERS[contender])
    name = f"{ws.run}-{kind.replace('_', '-').replace(':', '-').replace('+', '-')}-{attempt}"
    source, output = f"{name}-words", f"{name}-out"
    job = start(ws, kind, name, source, output)
    gate = Gate(ws.bootstrap, source, words)
    outputs = Outputs(ws.bootstrap, output)
    scraper = (
        common.Scraper(job.args[job.args.index("--metrics-port") + 1])
        if ("--metrics-port" in job.args)
        else contextlib.nullcontext()
    )
    try:
        launched = time.monotonic()
        job.start()
        outputs.wait(PARTITIONS, common.STARTUP_TIMEOUT_S, lambda: common.check(job))
        startup = time.monotonic() - launched
        cpu0, t0 = common.cpu_seconds(job.proc.pid), time.monotonic()
        gate.open()
        with scraper:
            first = outputs.wait(PARTITIONS + len(words), RUN_TIMEOUT_S, lambda: common.check(job))
        done, cpu1 = time.monotonic(), common.cpu_seconds(job.proc.pid)
        rss = common.peak_rss_mb(job.proc.pid)
        correctness = outputs.verify(words)
    finally:
        job.stop()
        outputs.close()
        gate.close()
    return {
        "startup_s": startup,  # process start until its warm-up outputs were readable
        "seconds": done - t0,  # input committed until every output was readable
        "first_s": (first or done) - t0,  # input committed until the first output was
        "records": len(words),
        "cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,  # all its threads
        "peak_rss_mb": rss,  # VmHWM of its process tree, when every output was readable
        **correctness,  # lost, duplicated: outputs per word against the input
    }


def row(contender: str, records: int, runs: list[dict]) -> dict:
    """A contender's medians over its runs."""
    return {
        **common.medians(contender, records, runs),
        "first_s": statistics.median(t["first_s"] for t in runs),
        "lost": max(t["lost"] for t in runs),  # the worst run
        "duplicated": max(t["duplicated"] for t in runs),
        "runs": runs,
    }


def describe(t: dict) -> str:
    cpu = "-" if t["cpu_s"] is None else f"{t['cpu_s']:.2f}s"
    return (
        f"{t['seconds']:6.2f}s ({t['records'] / t['seconds']:9,.0f} records/s; first output "
        f"after {t['first_s']:.3f}s; startup {t['startup_s']:.2f}s; CPU {cpu})"
    )


def run(args: object, contenders: Sequence[str], words: list[str] | None = None) -> list[dict]:
    """Every contender `repeat` times over the same input (`words`, else `args.records` Zipf
    words); one row per contender, with its ratios (records/s, CPU per record) to the bare
    loop's when it ran and to logwheel exactly_once's."""
    words = zipf_words(args.records) if words is None else words
    distinct = len(set(words))
    print(f"input: {len(words)} words, {distinct} distinct, {PARTITIONS} partitions")
    with common.Workspace(args.bootstrap, "tp", args.keep) as ws:
        inputs = {c: words[: len(words) // SHORTER.get(c, 1)] for c in contenders}
        runs = common.interleave(
            args.repeat, contenders, lambda c, n: measure(ws, inputs[c], c, n), describe
        )
    rows = [row(c, len(inputs[c]), runs[c]) for c in contenders]
    bare = next((r for r in rows if r["contender"] == BARE), None)
    bare_cpu = bare and bare["cpu_us_per_record"]
    eos = next((r for r in rows if r["contender"] == "logwheel exactly_once"), None)
    for r in rows:
        r["distinct"] = distinct
        r["ratio"] = r["records_per_s"] / bare["records_per_s"] if bare else None
        cpu = r["cpu_us_per_record"]
        r["cpu_ratio"] = bare_cpu / cpu if cpu and bare_cpu else None
        r["vs_logwheel_eos"] = r["records_per_s"] / eos["records_per_s"] if eos else None
        r["cpu_vs_logwheel_eos"] = (
            cpu / eos["cpu_us_per_record"] if eos and cpu and eos["cpu_us_per_record"] else None
        )
    return rows


COLUMNS = [("contender", -31), ("records", 8), ("seconds", 8), ("records/s", 10), ("ratio", 6)]
COLUMNS += [("first s", 8), ("startup s", 9), ("CPU us/rec", 10), ("CPU ratio", 9)]
COLUMNS += [("vs lw eos", 9), ("CPU/lw eos", 10), ("RSS MB", 7), ("lost", 5), ("dup", 6)]


def table(rows: Sequence[dict]) -> str:
    f = common.fmt
    return common.table(
        COLUMNS,
        (
            [r["contender"], r["records"], f(r["seconds"], ".2f"), f(r["records_per_s"], ",.0f")]
            + [f(r["ratio"], ".2f"), f(r["first_s"], ".3f"), f(r["startup_s"], ".2f")]
            + [f(r["cpu_us_per_record"], ".1f"), f(r["cpu_ratio"], ".2f")]
            + [f(r["vs_logwheel_eos"], ".2f"), f(r.get("cpu_vs_logwheel_eos"), ".2f")]
            + [f(r.get("peak_rss_mb"), ".0f"), r["lost"], r["duplicated"]]
            for r in rows
        ),
    )


def half_of_quix(rows: Sequence[dict], bound: float = 0.5) -> list[str]:
    """Issue 12's aim, per guarantee: logwheel's CPU per record at most `bound` times Quix
    Streams' (one line each, for the guarantees where both ran)."""
    by = {r["contender"]: r["cpu_us_per_record"] for r in rows}
    lines = []
    for guarantee in ("exactly_once", "at_least_once"):
        ours, quix = by.get(f"logwheel {guarantee}"), by.get(f"quix {guarantee}")
        if ours and quix:
            verdict = "met" if ours <= bound * quix else "NOT met"
            lines.append(
                f"aim: logwheel {guarantee} CPU/record <= {bound}x Quix Streams': {verdict} "
                f"({ours:.1f} vs {quix:.1f} us, {ours / quix:.2f}x)"
            )
    return lines


def metrics_overhead(rows: Sequence[dict], bound: float = 0.03) -> str:
    """Issue 10's aim: exactly-once throughput with the metrics endpoint served and scraped
    within `bound` of the same without it (by CPU per record, which noise moves least)."""
    by = {r["contender"]: r for r in rows}
    off, on = by.get("logwheel exactly_once"), by.get("logwheel exactly_once +metrics")
    if not (off and on and off["cpu_us_per_record"] and on["cpu_us_per_record"]):
        return "metrics overhead: not measured (needs both exactly_once contenders)"
    cpu = on["cpu_us_per_record"] / off["cpu_us_per_record"] - 1
    wall = off["records_per_s"] / on["records_per_s"] - 1
    verdict = "met" if cpu <= bound else "NOT met"
    return (
        f"aim: metrics on within {bound:.0%} of off: {verdict} (CPU/record {cpu:+.1%}, "
        f"records/s {-wall:+.1%})"
    )


def wire_overhead(rows: Sequence[dict], bound: float = 0.10) -> str:
    """Issue 22's aim: CountWords writing the Confluent wire format within `bound` of the same
    writing single-object encoding, by CPU per record."""
    by = {r["contender"]: r["cpu_us_per_record"] for r in rows}
    avro, wire = by.get("logwheel exactly_once"), by.get("logwheel exactly_once wire")
    if not (avro and wire):
        return "wire format overhead: not measured (needs both exactly_once contenders)"
    cpu = wire / avro - 1
    verdict = "met" if cpu <= bound else "NOT met"
    return (
        f"aim: wire format within {bound:.0%} of single-object encoding: {verdict} "
        f"(CPU/record {cpu:+.1%}: {wire:.1f} vs {avro:.1f} us)"
    )


def framework_share(rows: list[dict]) -> str:
    """What the framework costs beyond the work (logwheel exactly_once over the hand-written
    loop) and what the work costs beyond copying bytes (the hand-written loop over the bare
    loop), in CPU per record."""
    cpu = {r["contender"]: r["cpu_us_per_record"] for r in rows}
    eos, floor, bare = (
        cpu.get(c) for c in ("logwheel exactly_once", "hand-written exactly_once", BARE)
    )
    if not (eos and floor and bare):
        return (
            "framework share: not measured (needs the bare and hand-written loops and exactly_once)"
        )
    return (
        f"framework share: logwheel exactly_once {eos:.1f} us/record, the hand-written loop "
        f"{floor:.1f} ({eos / floor:.2f}x), the bare loop {bare:.1f} (the hand-written loop "
        f"{floor / bare:.2f}x it, logwheel {eos / bare:.2f}x)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("count-words throughput beside a bare loop", FULL, QUICK)
    parser.add_argument(
        "--contender",
        action="append",
        choices=[c for c in [*CONTENDERS, *PEERS] if c != BARE],
        help="measure only these contenders (repeatable); the bare loop always runs",
    )
    peers.add_option(parser, "also the peers, each in a virtualenv of its own")
    args = parser.parse(argv)
    contenders = [BARE] + [c for c in (args.contender or CONTENDERS) if c != BARE]
    contenders += [p for p in PEERS if args.peers and p not in contenders]

    print(f"throughput: the count-words stage, {args.records} records, on {args.bootstrap}")
    rows = run(args, contenders)
    print()
    print(table(rows))
    eos = next((r for r in rows if r["contender"] == "logwheel exactly_once"), None)
    if eos is not None:
        verdict = "met" if eos["ratio"] >= 0.5 else "NOT met"
        print(f"aim: exactly_once at >= 0.5x the bare loop: {verdict} ({eos['ratio']:.2f}x)")
    print(framework_share(rows))
    for line in half_of_quix(rows):
        print(line)
    print(metrics_overhead(rows))
    print(wire_overhead(rows))
    common.write_results(
        "throughput",
        args,
        stage="count-words",
        records=args.records,
        partitions=PARTITIONS,
        vocabulary=VOCABULARY,
        repeat=args.repeat,
        method=(
            "input pre-filled in an open transaction; the contender is started and warmed up"
            " (startup_s); seconds = from committing the input until every output is readable"
            " read_committed; records_per_s = records / seconds; ratio to the bare loop"
        ),
        rows=rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
