"""Interval join: orders x payments by customer, in logwheel and its peers.

What is measured: one join stage. Its inputs are two topics of 4 partitions, `orders` (left)
and `payments` (right), each holding half of `--records` JSON records {"id": ...} (an order and
its payment each) keyed by a customer (Zipf-distributed over `--keys` keys, Kafka's murmur2
partitioner), in time order over `--minutes` minutes of event time: order i at an even spacing,
its payment 0 to 1.25 x AFTER_MS later (a fifth of them too late to match their order; any may
meet other orders of the customer too). A right record at t_r meets a left one at t_l when
t_l - BEFORE_MS <= t_r <= t_l + AFTER_MS (BEFORE_MS 0: a payment follows its order), grace
GRACE_MS. Contenders, one after the other on the same broker in the same run, each over its own
copy of the same input (same records, partitions and order), with a consumer group and output
topic of its own, all exactly-once:

- `logwheel inner|left|outer`: `logwheel run` (tests.support.Job) of `pipeline.join("join",
  left=orders, right=payments, inputs={orders: None, payments: None}, before_ms=BEFORE_MS,
  after_ms=AFTER_MS, grace_ms=GRACE_MS, how=...)` over sources whose watermark is
  `BoundedOutOfOrderness(ms=0, idle_ms=IDLE_MS)` (the highest timestamp read on a partition,
  as the peers' stream time; the join's input low watermark is the lower of its two inputs');
- peers, with `--peers` or LOGWHEEL_BENCH_PEERS=1 (make bench sets it), each in a pinned
  virtualenv or build of its own (bench/peers.py): `kafka-streams inner|left|outer`,
  bench/kafka-streams' JoinOrders, `KStream#join|leftJoin|outerJoin` with
  `JoinWindows.ofTimeDifferenceAndGrace(AFTER_MS, GRACE_MS).before(BEFORE_MS)` (its fixed
  left/outer emission), exactly_once_v2, commit.interval.ms 100; `quix inner`,
  bench/peers/quix_join_interval.py, `join_interval(how="inner", backward_ms=BEFORE_MS,
  forward_ms=AFTER_MS)` in Quix Streams, exactly-once. Quix's left and outer joins are not
  measured: they write an order alone as soon as it arrives unpaid and the pair too when its
  payment comes (the error KAFKA-10847 fixed in Kafka Streams), which the check refuses.

Every result is (key, order id or None, payment id or None). The reference, worked out from
the input alone: every pair within the window, and with `left` every order no payment met
(with `outer` also every payment no order met), each once. The input ends with a closing order
and payment per partition far enough past the last data record to close every window (they meet
each other, and are in the reference), then a tail order per partition a millisecond later,
which no contender can answer (no payment comes after it, and no later record closes its
window; it is not in the reference): Kafka Streams, reading its two inputs in timestamp order,
holds a task's last record until the other input has been idle for max.task.idle.ms, and holds
only the tail so. The check (bench/verify.py), once the contender has
stopped and its output is read to its end: any result missing, unexpected, written twice or
late fails the benchmark (exit 1) and no figure is printed.

Timing as bench/windowed.py's: a warm-up order and payment per partition (a pair) committed
first, the measured input in one transaction left open; the contender starts and, once its
warm-up pairs are readable (a peer: once its group holds the inputs' partitions, see
`assigned`), the input commits (t0); `seconds` runs until every expected result
is readable. `CPU us/rec` is the CPU time (user + system, all threads, /proc) of the
contender's process tree from t0 to the last result, per input record; `CPU/quix` and
`CPU/kstreams` are logwheel's over Quix's inner join and Kafka Streams' join of the same kind.
State: `changelog B/rec`, the bytes (key + value) of every record the contender wrote to its
state's changelog topics during the whole run, read back after it stopped, per input record:
logwheel's changelog and timer journal, Kafka Streams' window stores' changelogs (and its
outer join's store of unmatched records), Quix's join stores' changelogs. The same measure for
every row: what a restore reads and the broker keeps until compaction.

    python bench/join.py [--records N] [--keys K] [--minutes M] [--quick] [--repeat R]
                         [--peers] [--contender NAME]... [--bootstrap H:P] [--out F]
"""

from __future__ import annotations

import bisect
import collections
import json
import random
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common, peers, verify  # noqa: E402
from bench.windowed import QUIET_S, Results, zipf_keys  # noqa: E402
from framework import BoundedOutOfOrderness, Pipeline  # noqa: E402
from tests.support import Job  # noqa: E402

FULL = {"records": 1_000_000, "keys": 10_000, "minutes": 360, "repeat": 1}
QUICK = {"records": 3_000, "keys": 100, "minutes": 4, "repeat": 1}
QUICK_ARGS = ["--quick"]
"""What `bench/run_all.py --quick` passes: a reduced run."""

PARTITIONS = 4
BEFORE_MS, AFTER_MS, GRACE_MS = 0, 2_000, 1_000
DELAY_MS = AFTER_MS * 5 // 4  # a payment comes up to this long after its order
IDLE_MS = 5_000
"""logwheel's sources' idle_ms here: the default. Behind the open input transaction every
partition is silent, past idle_ms; when it commits, no partition is idle while it has records
not yet read (the input fetched first once moved the join's watermark alone, and the other's
records were dropped as late: a 30,000-record run lost half its pairs), and the join's task
reads its two inputs in step by event time (framework/streaming/pacing.py), as Kafka Streams
does by timestamp."""
HOWS = ("inner", "left", "outer")
CONTENDERS = {f"logwheel {how}": how for how in HOWS}
PEERS = {
    "quix inner": ("quix", "exactly-once", "inner"),
    **{f"kafka-streams {how}": ("kafka-streams", "exactly_once_v2", how) for how in HOWS},
}
"""Peers, measured with --peers or LOGWHEEL_BENCH_PEERS=1: (peer, its guarantee, how)."""
QUIX_PROGRAM = common.BENCH / "peers" / "quix_join_interval.py"
RUN_TIMEOUT_S = 1_800.0

Result = tuple[str, str | None, str | None]
"""(key, order id, payment id): a pair, or one side alone (the other None)."""


def orders_payments(
    name: str, orders: str, payments: str, out: str, how: str, idle_ms: int = IDLE_MS
) -> Pipeline:
    """The pipeline a logwheel contender runs: the join alone over two pre-filled topics whose
    watermarks are the highest timestamp read (the peers' stream time), a partition silent
    for `idle_ms` no longer holding the watermark back (see IDLE_MS)."""
    pipeline = Pipeline(name, partitions=PARTITIONS)
    for stream in (orders, payments):
        pipeline.source(stream, watermark=BoundedOutOfOrderness(ms=0, idle_ms=idle_ms))
    pipeline.join(
        "join",
        left=orders,
        right=payments,
        inputs={orders: None, payments: None},
        before_ms=BEFORE_MS,
        after_ms=AFTER_MS,
        grace_ms=GRACE_MS,
        how=how,
        output=out,
        guarantee="exactly_once",
    )
    return pipeline


# -- the input and its reference -------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One input record: its key, event time, id, and partition (None: the key's, murmur2)."""

    key: str
    timestamp: int
    id: str
    partition: int | None = None


@dataclass(frozen=True)
class Input:
    """The records every contender reads, per side, and what it must write for them."""

    warmup: dict[str, list[Event]]  # "left"/"right" -> committed before the contender starts
    events: dict[str, list[Event]]  # the measured input, in one transaction
    closing: int  # how many of each side's `events` (the last ones) only close windows
    tail: list[Event]  # left records sent after `events`, never answered

    def records(self) -> int:
        return sum(map(len, self.events.values())) + len(self.tail)

    def expected(self, how: str) -> collections.Counter[Result]:
        """The reference: every pair of the warm-up and measured input, and the unmatched
        records `how` writes, by brute force over each key's records (sorted, bisected)."""
        sides = {s: self.warmup[s] + self.events[s] for s in ("left", "right")}
        return reference(sides["left"], sides["right"], how)


def reference(lefts: Iterable[Event], rights: Iterable[Event], how: str) -> collections.Counter:
    """What an interval join of `how` must write for these records, each result once."""
    by_key: dict[str, list[Event]] = collections.defaultdict(list)
    for r in rights:
        by_key[r.key].append(r)
    times = {k: sorted(rs, key=lambda e: e.timestamp) for k, rs in by_key.items()}
    stamps = {k: [e.timestamp for e in rs] for k, rs in times.items()}
    expected: collections.Counter[Result] = collections.Counter()
    matched: set[str] = set()
    for left in lefts:
        rs, ts = times.get(left.key, []), stamps.get(left.key, [])
        lo = bisect.bisect_left(ts, left.timestamp - BEFORE_MS)
        hi = bisect.bisect_right(ts, left.timestamp + AFTER_MS)
        for right in rs[lo:hi]:
            expected[(left.key, left.id, right.id)] += 1
            matched.add(right.id)
        if lo == hi and how in ("left", "outer"):
            expected[(left.key, left.id, None)] += 1
    if how == "outer":
        for rs in times.values():
            expected.update((r.key, None, r.id) for r in rs if r.id not in matched)
    return expected


def make_input(records: int, keys: int, minutes: int, base: int | None = None) -> Input:
    """A warm-up pair per partition at `base` (default: a day ago, on a minute); `records`
    orders and payments over `keys` customers in time order over `minutes` minutes after it;
    a closing pair per partition past the last window's close, then a tail order."""
    if base is None:
        base = int(time.time() * 1000) - 86_400_000
        base -= base % 60_000
    warmup = {
        "left": [Event(f"warmup-{p}", base, f"w{p}", p) for p in range(PARTITIONS)],
        "right": [Event(f"warmup-{p}", base, f"v{p}", p) for p in range(PARTITIONS)],
    }
    start, span, n = base + 60_000, minutes * 60_000, records // 2
    rng = random.Random(2)
    orders = [
        Event(key, start + i * span // n, f"o{i}") for i, key in enumerate(zipf_keys(n, keys))
    ]
    payments = sorted(
        (
            Event(o.key, o.timestamp + rng.randint(0, DELAY_MS), f"p{i}")
            for i, o in enumerate(orders)
        ),
        key=lambda e: e.timestamp,
    )
    end = payments[-1].timestamp + max(BEFORE_MS, AFTER_MS) + GRACE_MS + 60_000
    closing = {
        "left": [Event(f"warmup-{p}", end, f"c{p}", p) for p in range(PARTITIONS)],
        "right": [Event(f"warmup-{p}", end, f"d{p}", p) for p in range(PARTITIONS)],
    }
    events = {"left": orders + closing["left"], "right": payments + closing["right"]}
    tail = [Event(f"warmup-{p}", end + 1, f"t{p}", p) for p in range(PARTITIONS)]
    return Input(warmup, events, PARTITIONS, tail)


def result(msg) -> Result:
    """One written result as (key, order id, payment id), from logwheel's and Kafka Streams'
    value {"key", "left", "right"} or Quix's {"left", "right"} keyed by the key."""
    decoded = json.loads(msg.value())
    key = decoded.get("key") or msg.key().decode()
    left, right = decoded["left"], decoded["right"]
    return key, left and left["id"], right and right["id"]


# -- one run of one contender ----------------------------------------------------------------


class Gate(common.Gate):
    """Both input topics: the warm-up pairs readable at once, the measured input of both only
    after `open()` (one transaction)."""

    def __init__(self, bootstrap: str, topics: dict[str, str], data: Input) -> None:
        super().__init__(bootstrap)
        for side, topic in topics.items():
            for event in data.warmup[side]:
                self._send(topic, event)
        self.warmed()
        for side, topic in topics.items():
            for event in data.events[side]:
                self._send(topic, event)
        for event in data.tail:
            self._send(topics["left"], event)
        self.producer.flush(120)

    def _send(self, topic: str, event: Event) -> None:
        kwargs = {} if event.partition is None else {"partition": event.partition}
        value = json.dumps({"id": event.id}).encode()
        self.send(topic, value, event.key.encode(), timestamp=event.timestamp, **kwargs)


def changelog_bytes(bootstrap: str, topics: Sequence[str]) -> int:
    """Key and value bytes of every committed record of `topics`, read to their ends."""
    sizes = verify.read(bootstrap, topics, lambda m: len(m.key() or b"") + len(m.value() or b""))
    return sum(size * n for size, n in sizes.items())


def assigned(ws: common.Workspace, group: str, inputs: Iterable[str]) -> bool:
    """Whether consumer group `group` is stable with every partition of `inputs` assigned: when a
    peer is ready. Their warm-up pairs cannot tell: both read a join's two inputs in timestamp
    order and hold a partition's record while the other input may still have an earlier one.
    Quix waits while the broker reports records beyond its position (its high watermark counts
    the open transaction's records); Kafka Streams, here, for max.task.idle.ms. So their
    warm-up pairs come with the input."""
    future = ws.admin.describe_consumer_groups([group])[group]
    try:
        described = future.result(10)
    except confluent_kafka.KafkaException:
        return False
    if described.state != confluent_kafka.ConsumerGroupState.STABLE:
        return False
    inputs = set(inputs)
    held = [tp for m in described.members for tp in m.assignment.topic_partitions]
    return sum(tp.topic in inputs for tp in held) == len(inputs) * PARTITIONS


def start(
    ws: common.Workspace,
    contender: str,
    name: str,
    topics: dict[str, str],
    output: str,
    idle_ms: int = IDLE_MS,
):
    """The contender's process (topics created here) and its state's changelog topics (None:
    found by name once it has run)."""
    if contender in CONTENDERS:
        build = "bench.join:orders_payments"
        pipeline = ws.pipeline(
            build, name, topics["left"], topics["right"], output, CONTENDERS[contender], idle_ms
        )
        spec = pipeline.computations["join"]
        return ws.job(pipeline, "join"), [spec.changelog, spec.timers]
    peer, guarantee, how = PEERS[contender]
    ws.create_topics([topics["left"], topics["right"], output], PARTITIONS)
    ws.groups.append(name)
    windows = {"before_ms": str(BEFORE_MS), "after_ms": str(AFTER_MS), "grace_ms": str(GRACE_MS)}
    if peer == "kafka-streams":
        state = ws.dir / f"state-{name}"
        job = Job(peer, bootstrap=ws.bootstrap, state_dir=state, path=ws.dir)
        job.args = peers.kafka_streams("JoinOrders") + [
            ws.bootstrap, topics["left"], topics["right"], output, name, str(state), guarantee,
            how, *windows.values(),
        ]  # fmt: skip
        return job, None
    job = ws.peer_job(
        peer, name, topics["left"], output, guarantee, QUIX_PROGRAM,
        right=topics["right"], how=how, **windows,
    )  # fmt: skip
    return job, None


def measure(
    ws: common.Workspace, data: Input, contender: str, attempt: int, idle_ms: int = IDLE_MS
) -> dict:
    """One run of one contender: startup_s, seconds, records, cpu_s, changelog bytes, the
    check."""
    how = contender.split()[-1]
    expected = data.expected(how)
    slug = contender.replace(" ", "-")
    name = f"{ws.run}-{slug}-{attempt}"
    topics, output = {"left": f"{name}-orders", "right": f"{name}-payments"}, f"{name}-out"
    job, changelogs = start(ws, contender, name, topics, output, idle_ms)
    gate = Gate(ws.bootstrap, topics, data)
    results = Results(ws.bootstrap, output)
    total = sum(expected.values())
    try:
        launched = time.monotonic()
        job.start()
        if contender not in CONTENDERS:  # their warm-up pairs wait for the input: `assigned`
            ready = lambda: assigned(ws, name, topics.values())  # noqa: E731
            common.wait_until(ready, common.STARTUP_TIMEOUT_S, job)
        elif not results.wait(PARTITIONS, common.STARTUP_TIMEOUT_S, lambda: common.check(job)):
            raise RuntimeError(f"{contender}: no warm-up results\n{job.output()[-3000:]}")
        startup = time.monotonic() - launched
        cpu0, t0 = common.cpu_seconds(job.proc.pid), time.monotonic()
        gate.open()
        complete = results.wait(total, RUN_TIMEOUT_S, lambda: common.check(job))
        done, cpu1 = time.monotonic(), common.cpu_seconds(job.proc.pid)
        if not complete:
            done -= QUIET_S  # it stopped writing then
        rss = common.peak_rss_mb(job.proc.pid)
    finally:
        job.stop()
        results.close()
        gate.close()
        # the peers' own topics (changelogs, repartitions) are named after their group
        own = [t for t in ws.admin.list_topics(timeout=30).topics if name in t]
        ws.topics += own
    if changelogs is None:
        changelogs = [t for t in own if "changelog" in t]
    written = verify.read(ws.bootstrap, [output], result)
    short = max(0, total - results.seen)
    return {
        "startup_s": startup,
        "seconds": done - t0,
        "records": data.records(),
        "cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
        "peak_rss_mb": rss,
        "results": sum(written.values()),
        "expected": total,
        "changelogs": sorted(changelogs),
        "changelog_bytes": changelog_bytes(ws.bootstrap, changelogs),
        **verify.compare(expected, written, short_at_end=short),
    }


def row(contender: str, runs: list[dict]) -> dict:
    """A contender's medians over its runs, its state per record, and the worst run's check."""
    records = runs[0]["records"]
    return {
        **common.medians(contender, records, runs),
        "changelog_bytes_per_record": max(r["changelog_bytes"] for r in runs) / records,
        "results": runs[0]["results"],
        **verify.worst(runs),
        "runs": runs,
    }


def describe(t: dict) -> str:
    if not verify.passed(t):
        return f"{t['results']} results of {t['expected']}: {verify.describe(t)}"
    cpu = "-" if t["cpu_s"] is None else f"{t['cpu_s']:.2f}s"
    return (
        f"{t['seconds']:6.2f}s ({t['records'] / t['seconds']:9,.0f} records/s; startup "
        f"{t['startup_s']:.2f}s; CPU {cpu}; changelogs {t['changelog_bytes']:,} B; "
        f"{t['results']} results {verify.describe(t)})"
    )


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def run(args: object, contenders: Sequence[str]) -> tuple[Input, list[dict]]:
    """Every contender `repeat` times over the same input; one row per contender, logwheel's
    with its CPU per record over Quix's inner join and Kafka Streams' join of its kind."""
    data = make_input(args.records, args.keys, args.minutes)
    sizes = {how: sum(data.expected(how).values()) for how in HOWS}
    print(
        f"input: {data.records()} orders and payments ({data.closing} closing pairs),"
        f" {args.keys} keys, {args.minutes} minutes, {PARTITIONS} partitions; results:"
        f" {', '.join(f'{how} {n}' for how, n in sizes.items())}"
    )
    with common.Workspace(args.bootstrap, "join", args.keep) as ws:
        runs = common.interleave(
            args.repeat, contenders, lambda c, n: measure(ws, data, c, n, args.idle_ms), describe
        )
    rows = [row(c, runs[c]) for c in contenders]
    by = {r["contender"]: r for r in rows}
    for r in rows:
        how, cpu = r["contender"].split()[-1], r["cpu_us_per_record"]
        mine = r["contender"] in CONTENDERS
        r["cpu_vs_quix"] = (
            ratio(cpu, by.get("quix inner", {}).get("cpu_us_per_record"))
            if mine and how == "inner"
            else None
        )
        r["cpu_vs_kstreams"] = (
            ratio(cpu, by.get(f"kafka-streams {how}", {}).get("cpu_us_per_record"))
            if mine
            else None
        )
    return data, rows


COLUMNS = [("contender", -20), ("records", 9), ("results", 9), ("seconds", 8)]
COLUMNS += [("records/s", 10), ("CPU us/rec", 10), ("CPU/quix", 8), ("CPU/kstreams", 12)]
COLUMNS += [("changelog B/rec", 15), ("startup s", 9), ("RSS MB", 7)]


def table(rows: Sequence[dict]) -> str:
    f = common.fmt
    return common.table(
        COLUMNS,
        (
            [r["contender"], r["records"], r["results"], f(r["seconds"], ".2f")]
            + [f(r["records_per_s"], ",.0f"), f(r["cpu_us_per_record"], ".1f")]
            + [f(r["cpu_vs_quix"], ".2f"), f(r["cpu_vs_kstreams"], ".2f")]
            + [f(r["changelog_bytes_per_record"], ".1f"), f(r["startup_s"], ".2f")]
            + [f(r["peak_rss_mb"], ".0f")]
            for r in rows
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments(
        "interval join orders x payments: logwheel beside its peers", FULL, QUICK
    )
    parser.add_argument(
        "--contender",
        action="append",
        choices=[*CONTENDERS, *PEERS],
        help="measure only these contenders (repeatable)",
    )
    parser.add_argument(
        "--idle-ms", type=int, default=IDLE_MS, help=f"logwheel's sources' idle_ms ({IDLE_MS})"
    )
    peers.add_option(parser, "also the peers, each in a virtualenv or build of its own")
    args = parser.parse(argv)
    contenders = list(args.contender or CONTENDERS)
    contenders += [p for p in PEERS if args.peers and p not in contenders]

    print(f"join: orders x payments, {args.records} records, on {args.bootstrap}")
    data, rows = run(args, contenders)
    failed = verify.failures(rows)
    if not failed:
        print()
        print(table(rows))
    common.write_results(
        "join",
        args,
        stage=(
            f"interval join orders x payments by customer, before_ms {BEFORE_MS}, after_ms"
            f" {AFTER_MS}, grace_ms {GRACE_MS}, exactly-once"
        ),
        records=args.records,
        keys=args.keys,
        minutes=args.minutes,
        partitions=PARTITIONS,
        closing_pairs=data.closing,
        repeat=args.repeat,
        state_measure=(
            "changelog bytes: key + value bytes of every record written to the contender's"
            " state changelog topics during the run, per input record"
        ),
        method=(
            "both inputs in event-time order, ending with a closing pair per partition past"
            " every window and an unanswerable tail order; pre-filled in an open transaction;"
            " the contender is started and warmed up (startup_s); seconds = from committing"
            " the input until every expected result is readable read_committed; results"
            " checked against a reference worked out from the input"
        ),
        rows=rows,
        failed=failed,
    )
    return verify.report(failed)


if __name__ == "__main__":
    sys.exit(main())
