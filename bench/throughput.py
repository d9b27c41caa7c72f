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

Every run is checked before any figure is shown (bench/verify.py): once the contender has
stopped, its output topic is read to its end (read_committed) and every output, as (key, word,
count), compared with the reference worked out from the input: per input record of a word, one
output carrying the word's count so far, 1, 2, ..., n (the bare loop copies its input: n
copies of the record). `missing`, `unexpected`, `duplicated` and `late` are the worst run's; a
contender with any is reported FAILED, its figures are not printed, and the benchmark exits 1.

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
Every aim line compares CPU per record of contenders that read the same input in the same run.
Faust, about 40x slower than the rest, reads the first 1/20 of the input (to keep make bench
within its time), and logwheel at_least_once runs again on that same shorter input beside it:
those two rows are compared with each other only.

    python bench/throughput.py [--records N] [--quick] [--repeat R] [--bootstrap H:P] [--out F]
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fastavro import schemaless_reader  # noqa: E402

from bench import common, peers, verify  # noqa: E402
from framework import Dedup, Pipeline  # noqa: E402
from framework.jvm.process import any_free_port  # noqa: E402
from framework.serde.avro_codec import MARKER  # noqa: E402
from framework.serde.catalogue import default_schemas  # noqa: E402
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
that a full run stays within make bench's time; `BESIDE_SHORTER` runs again on that same
input, beside them, so that they are compared on the same input."""
BESIDE_SHORTER = "logwheel at_least_once"
BARE = "bare loop"
RUN_TIMEOUT_S = 600.0  # a liveness bound: a million records take 10-30 s here
WordCount = tuple[str | None, str | None, int | None]
"""An output as the check sees it: (key, word, count); count None where the output is a copy
of the input (the bare loop)."""


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
        .source(words, format="json")  # JSON words, registry or not
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
    """A read_committed reader of every partition of an output topic, counting records as
    they become readable (what a run is timed by; `verify.read` checks them afterwards)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = common.follow(bootstrap, [topic], **{"fetch.wait.max.ms": 10})
        self.seen = 0

    def wait(
        self, count: int, timeout: float, healthy: Callable[[], None], fail: bool = True
    ) -> float | None:
        """Read until `count` records in all (`healthy` raises if the contender failed);
        returns the monotonic time the first new record arrived (None if none was needed).
        After `timeout` s, raise if `fail`, else return: the check finds what is missing."""
        first, deadline = None, time.monotonic() + timeout
        while self.seen < count:
            if time.monotonic() > deadline:
                if not fail:
                    break
                raise RuntimeError(f"{self.topic}: {self.seen}/{count} after {timeout}s")
            healthy()
            got = len(common.records(self.consumer.consume(10_000, 0.02)))
            self.seen += got
            if got and first is None:
                first = time.monotonic()
        return first

    def close(self) -> None:
        self.consumer.close()


def warmups() -> list[str]:
    """The warm-up words the gate writes first, one per partition."""
    return [f"warmup-{p}" for p in range(PARTITIONS)]


def reference(words: Sequence[str], copies: bool = False) -> collections.Counter[WordCount]:
    """What a contender must write for the warm-up words and then `words`: per input record
    of a word, (word, word, the word's count so far); with `copies` (the bare loop), the
    input record itself, (word, word, None)."""
    counts: collections.Counter[str] = collections.Counter()
    expected: collections.Counter[WordCount] = collections.Counter()
    for word in [*warmups(), *words]:
        counts[word] += 1
        expected[(word, word, None if copies else counts[word])] += 1
    return expected


def word_count(msg) -> WordCount:
    """An output of any contender as (key, word, count): logwheel's Avro single-object or
    Confluent wire format (`wordcount.WordCount`), the peers' JSON, the bare loop's copy."""
    value, key = msg.value(), msg.key()
    if value[:2] == MARKER:
        decoded = default_schemas().decode_any(value)
    elif value[:1] == b"\x00":  # the Confluent wire format: magic byte, schema id, Avro body
        body = io.BytesIO(value[5:])
        decoded = schemaless_reader(body, default_schemas()["wordcount.WordCount"], None)
    else:
        decoded = json.loads(value)
    return (None if key is None else key.decode()), decoded.get("word"), decoded.get("count")


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


def measure(
    ws: common.Workspace,
    words: list[str],
    expected: collections.Counter[WordCount],
    contender: str,
    attempt: int,
) -> dict:
    """One run of one contender: startup_s, seconds, first_s, records, cpu_s, and the check
    of its outputs against `expected`, read to their end once it has stopped."""
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
            total = PARTITIONS + len(words)
            first = outputs.wait(total, RUN_TIMEOUT_S, lambda: common.check(job), fail=False)
        done, cpu1 = time.monotonic(), common.cpu_seconds(job.proc.pid)
        rss = common.peak_rss_mb(job.proc.pid)
    finally:
        job.stop()
        outputs.close()
        gate.close()
    written = verify.read(ws.bootstrap, [output], word_count)
    check = verify.compare(expected, written, short_at_end=max(0, total - outputs.seen))
    return {
        "startup_s": startup,  # process start until its warm-up outputs were readable
        "seconds": done - t0,  # input committed until every output was readable
        "first_s": (first or done) - t0,  # input committed until the first output was
        "records": len(words),
        "cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,  # all its threads
        "peak_rss_mb": rss,  # VmHWM of its process tree, when every output was readable
        **check,  # missing, unexpected, duplicated, late: its outputs against the reference
    }


def row(contender: str, records: int, runs: list[dict]) -> dict:
    """A contender's medians over its runs."""
    return {
        **common.medians(contender, records, runs),
        "first_s": statistics.median(t["first_s"] for t in runs),
        **verify.worst(runs),
        "runs": runs,
    }


def describe(t: dict) -> str:
    cpu = "-" if t["cpu_s"] is None else f"{t['cpu_s']:.2f}s"
    if not verify.passed(t):
        return verify.describe(t)
    return (
        f"{t['seconds']:6.2f}s ({t['records'] / t['seconds']:9,.0f} records/s; first output "
        f"after {t['first_s']:.3f}s; startup {t['startup_s']:.2f}s; CPU {cpu}; "
        f"{verify.describe(t)})"
    )


def run(args: object, contenders: Sequence[str], words: list[str] | None = None) -> list[dict]:
    """Every contender `repeat` times over the same input (`words`, else `args.records` Zipf
    words), each checked; one row per contender, with its ratios (records/s, CPU per record)
    to the bare loop's and logwheel exactly_once's in the same run. A contender of `SHORTER`
    reads the first 1/N of the words, beside `BESIDE_SHORTER` on the same words: their rows
    (`input` "first 1/N") come last and are compared with each other only."""
    words = zipf_words(args.records) if words is None else words
    distinct = len(set(words))
    print(f"input: {len(words)} words, {distinct} distinct, {PARTITIONS} partitions")
    groups = {"all": ([c for c in contenders if c not in SHORTER], words)}
    for c in (c for c in contenders if c in SHORTER):
        groups[f"first 1/{SHORTER[c]}"] = ([BESIDE_SHORTER, c], words[: len(words) // SHORTER[c]])
    rows = []
    with common.Workspace(args.bootstrap, "tp", args.keep) as ws:
        for label, (members, part) in groups.items():
            if label != "all":
                print(f"input: the first {len(part)} words, for {members[1]} beside {members[0]}")
            expected = {copies: reference(part, copies) for copies in {c == BARE for c in members}}
            runs = common.interleave(
                args.repeat,
                members,
                lambda c, n, p=part, e=expected: measure(ws, p, e[c == BARE], c, n),
                describe,
            )
            rows += ratios([row(c, len(part), runs[c]) | {"input": label} for c in members])
    for r in rows:
        r["distinct"] = distinct
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """Each row's records/s and CPU per record beside the bare loop's and logwheel
    exactly_once's among `rows` (contenders of one input, one run)."""
    bare = next((r for r in rows if r["contender"] == BARE), None)
    bare_cpu = bare and bare["cpu_us_per_record"]
    eos = next((r for r in rows if r["contender"] == "logwheel exactly_once"), None)
    for r in rows:
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
COLUMNS += [("vs lw eos", 9), ("CPU/lw eos", 10), ("RSS MB", 7), ("input", -13)]


def table(rows: Sequence[dict]) -> str:
    f = common.fmt
    return common.table(
        COLUMNS,
        (
            [r["contender"], r["records"], f(r["seconds"], ".2f"), f(r["records_per_s"], ",.0f")]
            + [f(r["ratio"], ".2f"), f(r["first_s"], ".3f"), f(r["startup_s"], ".2f")]
            + [f(r["cpu_us_per_record"], ".1f"), f(r["cpu_ratio"], ".2f")]
            + [f(r["vs_logwheel_eos"], ".2f"), f(r.get("cpu_vs_logwheel_eos"), ".2f")]
            + [f(r.get("peak_rss_mb"), ".0f"), r.get("input", "all")]
            for r in rows
        ),
    )


def aims(rows: Sequence[dict]) -> list[str]:
    """Every aim's line, from the rows of one input in one run, by CPU per record."""
    lines = [half_of_bare(rows), framework_share(rows), *half_of_quix(rows)]
    return lines + [metrics_overhead(rows), wire_overhead(rows)]


def half_of_bare(rows: Sequence[dict], bound: float = 0.5) -> str:
    """The aim of the first benchmark: logwheel exactly_once at least `bound` times the bare
    loop, by CPU per record (the bare loop's over logwheel's)."""
    by = {r["contender"]: r for r in rows}
    eos = by.get("logwheel exactly_once")
    if not (eos and eos["cpu_ratio"]):
        return "aim vs the bare loop: not measured (needs the bare loop and exactly_once)"
    verdict = "met" if eos["cpu_ratio"] >= bound else "NOT met"
    return (
        f"aim: exactly_once at >= {bound}x the bare loop by CPU/record: {verdict} "
        f"({eos['cpu_ratio']:.2f}x: {eos['cpu_us_per_record']:.1f} vs "
        f"{by[BARE]['cpu_us_per_record']:.1f} us)"
    )


def beside_shorter(rows: Sequence[dict]) -> list[str]:
    """Each shorter contender beside `BESIDE_SHORTER` on the same shorter input, by CPU per
    record (not an aim: where it stands)."""
    lines = []
    for label in dict.fromkeys(r["input"] for r in rows if r["input"] != "all"):
        ours, theirs = (r for r in rows if r["input"] == label)
        if ours["cpu_us_per_record"] and theirs["cpu_us_per_record"]:
            lines.append(
                f"{theirs['contender']} on the {label} of the input ({theirs['records']:,} "
                f"records): {theirs['cpu_us_per_record']:.1f} us/record, {ours['contender']} "
                f"{ours['cpu_us_per_record']:.1f} on the same records "
                f"({theirs['cpu_us_per_record'] / ours['cpu_us_per_record']:.1f}x)"
            )
    return lines


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
    failed = verify.failures(rows, lambda r: f"{r['contender']} ({r['input']} input)")
    if not failed:
        print()
        print(table(rows))
        for line in aims([r for r in rows if r["input"] == "all"]):
            print(line)
        for line in beside_shorter(rows):
            print(line)
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
        failed=failed,
    )
    return verify.report(failed)


if __name__ == "__main__":
    sys.exit(main())
