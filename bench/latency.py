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
the same wall clock (one machine), in ms. Records sent before the first output appeared and in
the `--warmup` seconds after it are excluded (process start, group join, restore); the next
`--duration` seconds of sends are measured. Before any figure is shown every run is checked
(bench/verify.py): once the computation has stopped, each followed topic is read to its end
(read_committed) and must hold every record the sender delivered, (seq, n), exactly once (one
whose send the broker timed out never entered the pipeline: left out, and the run says how
many): a record `missing`, `unexpected` or `duplicated` on any hop, or a measured record the
reader had not seen when the drain ended (`late`: it would have no delay), fails the benchmark
(exit 1), so no percentile is ever taken over fewer records than were measured. Both guarantees
run one after the other in one invocation on the same broker, each with fresh topics and
consumer groups; `--repeat` interleaves several runs and pools their records. `cpu %` is the
computation process's CPU time over the measured window; `load` the machine's 1-minute load
average at its end (everything shares one machine, the broker included: tails move with it,
medians much less).

The paper's figures (200 CPUs, Bigtable, no Kafka) are 3.6 ms median / 30 ms p95 with strong
productions and exactly-once disabled, and 33.7 ms / 93.8 ms with both enabled; `x p50` and
`x p95` are ours over theirs. The runtimes differ (the paper's record delay is one RPC hop;
here a record crosses two Kafka topics and, under exactly_once, two transactions), so read the
ratios as "how far from MillWheel", not as like-for-like.

    python bench/latency.py [--quick] [--rate R] [--duration S] [--warmup S] [--guarantee G]...
                            [--repeat N] [--bootstrap H:P] [--out FILE] [--keep]
"""

from __future__ import annotations

import bisect
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, peers, verify  # noqa: E402
from framework import Computation, Pipeline, key_by  # noqa: E402
from framework.kafka.collector import ID_HEADER  # noqa: E402
from framework.kafka.config import producer_config  # noqa: E402

QUICK_ARGS = ["--quick"]
"""What `bench/run_all.py --quick` passes: a reduced run (~5 s of measured sends per guarantee)."""

FULL = {"rate": 300.0, "duration": 20.0, "warmup": 5.0}
QUICK = {"rate": 200.0, "duration": 5.0, "warmup": 2.0}
GUARANTEES = ("at_least_once", "exactly_once")
PARTITIONS = 4
PAPER = {  # MillWheel §8.1, ms: without / with strong productions and exactly-once
    "at_least_once": {"p50": 3.6, "p95": 30.0},
    "exactly_once": {"p50": 33.7, "p95": 93.8},
}
COMPUTATION = "bucket-sort"
BUCKET_WIDTH = 10_000
NUMBERS = 1_000_000
KEEP = 32
DRAIN_TIMEOUT_S = 60.0  # a liveness bound: Quix exactly-once shows its outputs every 5 s
HOPS = ("source", "by-key", "output")


class BucketSort(Computation):
    """Keeps, per bucket, the `KEEP` smallest numbers seen, sorted; one output per input."""

    def __init__(self, output: str) -> None:
        self.output = output

    def process_record(self, ctx, record):
        v = record.value
        numbers = list(ctx.state.get("numbers", ()))
        rank = bisect.bisect_left(numbers, v["n"])
        numbers.insert(rank, v["n"])
        ctx.state["numbers"] = numbers[:KEEP]
        out = {"seq": v["seq"], "sent_us": v["sent_us"], "n": v["n"], "rank": rank}
        ctx.produce(self.output, out)


def build(name: str, source: str, output: str, guarantee: str) -> Pipeline:
    """The measured pipeline: `bucket-sort` reading `source` re-keyed by bucket."""
    return (
        Pipeline(name)
        .source(source)
        .computation(
            COMPUTATION,
            lambda: BucketSort(output),
            inputs={source: key_by("bucket")},
            outputs={output: None},
            guarantee=guarantee,
        )
    )


class Sender(common.Worker):
    """Writes records at a steady rate until stopped; remembers when each was sent."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__()
        self.topic, self.rate = topic, rate
        self.producer = Producer(producer_config(bootstrap))  # logwheel's own tuning
        self.sent: list[int] = []  # sent_us by seq
        self.numbers: list[int] = []  # n by seq
        # seq -> why its delivery failed: it never reached the pipeline, so it is not checked
        # there (a loaded broker can time a send out)
        self.undelivered: dict[int, str] = {}

    def _delivered(self, seq: int, err: object) -> None:
        if err is not None:  # a delivery callback must not raise
            self.undelivered[seq] = str(err)

    def work(self) -> None:
        rng, start = random.Random(7), time.monotonic()
        while not self.stop.is_set():
            seq = len(self.sent)
            delay = start + seq / self.rate - time.monotonic()
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
                on_delivery=lambda err, _msg, seq=seq: self._delivered(seq, err),
            )
            self.sent.append(sent_us)
            self.numbers.append(n)
            self.producer.poll(0)
        self.producer.flush(30)


class Reader(common.Worker):
    """A read_committed consumer of the three topics noting when each record first appears
    (`poll()` one record at a time, so it never waits for a batch)."""

    def __init__(self, bootstrap: str, topics: dict[str, str]) -> None:
        super().__init__()
        self.hop = {topic: hop for hop, topic in topics.items()}
        self.seen: dict[str, dict[int, int]] = {hop: {} for hop in topics}
        settings = {"fetch.wait.max.ms": 5, "fetch.queue.backoff.ms": 0}
        self.consumer = common.follow(bootstrap, topics.values(), **settings)

    def work(self) -> None:
        try:
            while not self.stop.is_set():
                msg = self.consumer.poll(0.1)
                now_us = time.time_ns() // 1000
                for record in common.records([] if msg is None else [msg]):
                    hop = self.hop[record.topic()]
                    self.seen[hop].setdefault(json.loads(record.value())["seq"], now_us)
        finally:
            self.consumer.close()


def quix_job(ws: common.Workspace, name: str, source: str, output: str, guarantee: str):
    """bench/peers/quix_bucket_sort.py as a job over `source` and `output` (created here)."""
    ws.create_topics([source, output], PARTITIONS)
    ws.groups.append(name)
    program = common.BENCH / "peers" / "quix_bucket_sort.py"
    return ws.peer_job("quix", name, source, output, guarantee.replace("_", "-"), program)


def measure(args, ws: common.Workspace, contender: str, attempt: int) -> dict:
    """One run of one contender (a guarantee, or "quix <guarantee>"): startup, CPU and load,
    per hop the delays (ms) of the measured records, and the check of every hop's records.
    Quix's repartition topic is its own: its `by-key` hop is not followed."""
    system, _, guarantee = contender.rpartition(" ")
    name = f"{ws.run}-{contender.replace('_', '-').replace(' ', '-')}-{attempt}"
    source, output = f"{name}-numbers", f"{name}-sorted"
    topics = {"source": source, "output": output}
    if system == "quix":
        job = quix_job(ws, name, source, output, guarantee)
    else:
        pipeline = ws.pipeline("bench.latency:build", name, source, output, guarantee)
        job = ws.job(pipeline, COMPUTATION)
        topics["by-key"] = pipeline[COMPUTATION].by_key(source)
    sender = Sender(ws.bootstrap, source, args.rate)
    reader = Reader(ws.bootstrap, topics)
    reader.start()
    try:
        launched = time.monotonic()
        job.start()
        sender.start()
        started = lambda: reader.seen["output"]  # noqa: E731
        common.wait_until(started, common.STARTUP_TIMEOUT_S, job, sender, reader)
        startup = time.monotonic() - launched
        time.sleep(args.warmup)
        first, cpu0, t0 = len(sender.sent), common.cpu_seconds(job.proc.pid), time.monotonic()
        time.sleep(args.duration)
        last, cpu1, t1 = len(sender.sent), common.cpu_seconds(job.proc.pid), time.monotonic()
        load = os.getloadavg()[0]
        sender.stop.set()
        sender.join(60)
        measured = [s for s in range(first, last) if s not in sender.undelivered]
        sent = [s for s in range(len(sender.sent)) if s not in sender.undelivered]
        arrived = lambda: all(s in reader.seen[h] for h in topics for s in sent)  # noqa: E731
        common.wait_until(arrived, DRAIN_TIMEOUT_S, job, sender, reader, fail=False)
    finally:
        sender.stop.set()
        job.stop()
        reader.stop.set()
        reader.join(30)
        if system == "quix":  # its internal topics, named by its rules
            ws.topics += [t for t in ws.admin.list_topics(timeout=30).topics if name in t]
    hop_of = {topic: hop for hop, topic in topics.items()}

    def record(msg) -> tuple[str, int, int]:
        value = json.loads(msg.value())
        return hop_of[msg.topic()], value["seq"], value["n"]

    written = verify.read(ws.bootstrap, topics.values(), record)
    expected = [(hop, seq, sender.numbers[seq]) for hop in topics for seq in sent]
    unseen = sum(s not in reader.seen[hop] for hop in topics for s in measured)
    result = {
        "startup_s": startup,  # process start until its first output was readable
        "cpu_pct": float("nan") if cpu0 is None else 100 * (cpu1 - cpu0) / (t1 - t0),
        "load": load,  # the machine's 1-minute load average at the end of the window
        "sent": len(sent),
        "undelivered": len(sender.undelivered),  # the sender's, left out of the check
        **verify.compare(expected, written, short_at_end=unseen),
    }
    for hop in (h for h in HOPS if h in topics):
        seen = reader.seen[hop]
        result[hop] = {"delays": [(seen[s] - sender.sent[s]) / 1000 for s in measured if s in seen]}
    return result


def hop_stats(attempts: list[dict], hop: str) -> dict:
    """Percentiles of the delays of every attempt's measured records together."""
    delays = [d for a in attempts for d in a[hop]["delays"]]
    return {"records": len(delays), **common.spread(delays)}


def pool(contender: str, rate: float, attempts: list[dict]) -> dict:
    """One row over every attempt: percentiles of all their records together."""
    system, _, guarantee = contender.rpartition(" ")
    hops = [h for h in HOPS if h in attempts[0]]
    per_attempt = []
    for a in attempts:
        entry = {k: a[k] for k in ("startup_s", "cpu_pct", "load")}
        for hop in hops:
            s = hop_stats([a], hop)
            entry[hop] = {k: s[k] for k in ("p50", "p95", "p99", "records")}
        per_attempt.append(entry)
    return {
        "delays_ms": [round(d, 2) for a in attempts for d in a["output"]["delays"]],  # plots
        "system": system or "logwheel",
        "guarantee": guarantee,
        "rate": rate,
        "startup_s": statistics.median(a["startup_s"] for a in attempts),
        "cpu_pct": statistics.mean(a["cpu_pct"] for a in attempts),  # % of one core
        "load": statistics.mean(a["load"] for a in attempts),
        "hops": {hop: hop_stats(attempts, hop) for hop in hops},
        "attempts": per_attempt,
        **verify.worst(attempts),
    }


def describe(a: dict) -> str:
    lost = a.get("undelivered", 0)
    sent = f"{a['sent']} sent" + (f", {lost} the sender could not deliver left out" if lost else "")
    if not verify.passed(a):
        return f"{sent}: {verify.describe(a)}"
    out = hop_stats([a], "output")
    return (
        f"output p50 {out['p50']:6.1f} ms, p95 {out['p95']:6.1f}, p99 {out['p99']:6.1f} "
        f"({out['records']} records measured, {sent}, {verify.describe(a)}; startup "
        f"{a['startup_s']:.1f}s, cpu {a['cpu_pct']:.0f}%, load {a['load']:.1f})"
    )


COLUMNS = [("contender", -22), ("hop", -7), ("records", 7), ("p50 ms", 7), ("p95 ms", 7)]
COLUMNS += [("p99 ms", 7), ("max ms", 7), ("paper p50/p95", 13), ("x p50", 6), ("x p95", 6)]
COLUMNS += [("cpu %", 6), ("load", 5)]


def table(rows: Sequence[dict]) -> str:
    lines = []
    for r in rows:
        for hop, s in r["hops"].items():
            system = "" if r["system"] == "logwheel" else f"{r['system']} "
            cells = [system + r["guarantee"], hop, s["records"]]
            cells += [f"{s[k]:.1f}" for k in ("p50", "p95", "p99", "max")]
            if hop == "output":
                p = PAPER[r["guarantee"]]
                cells += [f"{p['p50']:g}/{p['p95']:g}", f"{s['p50'] / p['p50']:.1f}"]
                cells += [f"{s['p95'] / p['p95']:.1f}", f"{r['cpu_pct']:.0f}", f"{r['load']:.1f}"]
            else:
                cells += [""] * 5
            lines.append(cells)
    return common.table(COLUMNS, lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("record delay through a differently-keyed stage", FULL, QUICK)
    parser.add_argument(
        "--guarantee", action="append", choices=GUARANTEES, help="default: both, in turn"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each, interleaved; percentiles pooled"
    )
    peers.add_option(parser, "Quix Streams at the same rate beside logwheel")
    args = parser.parse(argv)
    guarantees = args.guarantee or list(GUARANTEES)
    guarantees += [f"quix {g}" for g in guarantees] if args.peers else []

    print(
        f"latency: {COMPUTATION} (key_by -> .by-key -> state -> output) at {args.rate:g} "
        f"records/s, {args.warmup:g}s warm-up + {args.duration:g}s measured, on "
        f"{args.bootstrap} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    with common.Workspace(args.bootstrap, "lat", args.keep) as ws:
        measure_one = lambda g, n: measure(args, ws, g, n)  # noqa: E731
        attempts = common.interleave(args.repeat, guarantees, measure_one, describe)
    rows = [pool(g, args.rate, attempts[g]) for g in guarantees]
    failed = verify.failures(rows, lambda r: f"{r['system']} {r['guarantee']}")
    if not failed:
        print()
        print("delay = visible to a read_committed reader - send time (ms); hops: source = the")
        print("input topic (Kafka alone), by-key = after the repartition commit, output = end")
        print("to end. x p50 / x p95 = output over MillWheel §8.1 (3.6/30 ms without, 33.7/93.8")
        print("with strong productions + exactly-once).")
        print(table(rows))
    common.write_results(
        "latency",
        args,
        paper="MillWheel §8.1 (Figure 13)",
        rate=args.rate,
        duration_s=args.duration,
        warmup_s=args.warmup,
        repeat=args.repeat,
        method=(
            "plain producer -> source (key A) -> bucket-sort with key_by(bucket) via .by-key "
            "-> output; delay = first visibility to a read_committed reader - sent_us taken "
            "before produce(); records sent in the warm-up after the first output excluded"
        ),
        paper_ms=PAPER,
        rows=rows,
        failed=failed,
    )
    return verify.report(failed)


if __name__ == "__main__":
    sys.exit(main())
