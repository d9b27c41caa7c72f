"""What the benchmarks share: arguments, a run's scratch space and cleanup, readers, background
threads with errors the main thread sees, CPU time, percentiles and the results file.

A benchmark is `bench/<name>.py` with `main(argv) -> int` and `QUICK_ARGS` (see run_all.py).
It starts its computations as real `logwheel run` processes (tests.support.Job) over topics
named uniquely per run, so runs never meet on a shared broker, and deletes them afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from framework.broker.bootstrap import bootstrap_from  # noqa: E402
from framework.core.pipeline import Pipeline  # noqa: E402
from framework.kafka.config import producer_config  # noqa: E402
from framework.kafka.topics import create_topics, pipeline_topics  # noqa: E402
from framework.registry.embedded import Registry  # noqa: E402
from tests.support import Job, import_job, unique_name, write_job  # noqa: E402

RESULTS = BENCH / "results"
T = TypeVar("T")
STARTUP_TIMEOUT_S = 120.0
SIZES = {"records": "input records", "rate": "records/s", "duration": "measured seconds"}
SIZES["warmup"] = "seconds before measuring"
SIZES["size_repeat"] = "interleaved rounds at each input size, median"
SIZES["keys"] = "distinct keys"
SIZES["minutes"] = "minutes of event time, one tumbling window each"

# -- arguments and results -------------------------------------------------------------------


class Arguments(argparse.ArgumentParser):
    """The options every benchmark has, and its sizes: `--NAME` for each of `full`, which
    `--quick` turns to `quick`'s."""

    def __init__(self, description: str, full: dict, quick: dict | None = None) -> None:
        super().__init__(description=description)
        self.full, self.quick = full, quick or full
        if quick:
            self.add_argument("--quick", action="store_true", help="a reduced run (make test)")
        for name, value in full.items():
            default = f"default {value:_g}" + (f", {self.quick[name]:_g} quick" if quick else "")
            help_ = f"{SIZES.get(name, name)} ({default})"
            flag = "--" + name.replace("_", "-")
            self.add_argument(flag, dest=name, type=type(value), help=help_)
        self.add_argument("--bootstrap", help="else LOGWHEEL_BOOTSTRAP, else the embedded broker")
        self.add_argument("--out", type=Path, help="results file (default under bench/results/)")
        self.add_argument("--keep", action="store_true", help="keep topics, logs and state")

    def parse(self, argv: Sequence[str] | None) -> argparse.Namespace:
        """Parse `argv`; a size not given is the run's (full or quick); the bootstrap address
        is resolved once (`framework.broker.bootstrap.bootstrap_from`)."""
        args = self.parse_args(argv)
        args.quick = getattr(args, "quick", False)
        for name, value in (self.quick if args.quick else self.full).items():
            if getattr(args, name) is None:
                setattr(args, name, value)
        args.bootstrap = bootstrap_from(args.bootstrap)
        args.argv = list(sys.argv[1:] if argv is None else argv)
        args.started = time.monotonic()
        return args


def write_results(benchmark: str, args: argparse.Namespace, **fields: object) -> Path:
    """Write `fields` with what every result carries (date, argv, broker, machine, elapsed)
    to `--out`, else bench/results/<benchmark>[.quick].json; returns the path. `fields`
    carry `failed`: the check's failure lines (bench/verify.py), empty when it passed."""
    out = args.out or RESULTS / f"{benchmark}{'.quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    elapsed = round(time.monotonic() - args.started, 1)
    report = {
        "benchmark": benchmark,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": args.argv,
        "bootstrap": args.bootstrap,
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(),
            "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0],
        },
        **fields,
        "elapsed_s": elapsed,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {shown(out)} ({elapsed}s)")
    return out


def shown(path: Path) -> Path:
    """`path` relative to the repository when it is inside it."""
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def table(columns: Sequence[tuple[str, int]], rows: Iterable[Sequence[object]]) -> str:
    """A text table under a rule: `columns` are (title, width), a negative width aligning
    left; a cell None shows "-"; cells past the last column are notes, unpadded."""

    def line(cells: Sequence[object]) -> str:
        texts = ["-" if c is None else str(c) for c in cells]
        padded = [
            t.ljust(-w) if w < 0 else t.rjust(w) for t, (_, w) in zip(texts, columns, strict=False)
        ]
        return " ".join(padded + texts[len(columns) :]).rstrip()

    head = line([title for title, _ in columns])
    return "\n".join([head, "-" * len(head), *map(line, rows)])


def medians(contender: str, records: int, runs: Sequence[dict]) -> dict:
    """The part of a contender's result row every benchmark shares: medians of its runs'
    time, startup and CPU per record, and the largest peak RSS."""
    seconds = statistics.median(t["seconds"] for t in runs)
    cpus = [t["cpu_s"] for t in runs]
    return {
        "contender": contender,
        "records": records,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "startup_s": statistics.median(t["startup_s"] for t in runs),
        "cpu_us_per_record": None if None in cpus else statistics.median(cpus) / records * 1e6,
        "peak_rss_mb": max((t.get("peak_rss_mb") or 0 for t in runs), default=0) or None,
    }


def spread(values: Iterable[float]) -> dict[str, float]:
    """Mean, stdev, nearest-rank percentiles and extremes (NaN where there are too few)."""
    v = sorted(values)
    nan = float("nan")

    def rank(q: float) -> float:
        return v[max(0, math.ceil(q / 100 * len(v)) - 1)] if v else nan

    return {
        "mean": statistics.fmean(v) if v else nan,
        "stdev": statistics.stdev(v) if len(v) > 1 else nan,
        "p50": rank(50),
        "p95": rank(95),
        "p99": rank(99),
        "min": v[0] if v else nan,
        "max": v[-1] if v else nan,
    }


# -- a run's scratch space -------------------------------------------------------------------


class Workspace:
    """A temporary directory for generated job modules, logs and state, and the topics and
    consumer groups a run creates; on exit both are deleted unless `keep`."""

    def __init__(self, bootstrap: str, prefix: str, keep: bool = False) -> None:
        self.bootstrap, self.keep = bootstrap, keep
        self.run = unique_name(prefix)  # streams are named globally: one prefix per run
        self.dir = Path(tempfile.mkdtemp(prefix=f"logwheel-{prefix}-"))
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.topics: list[str] = []
        self.groups: list[str] = []
        self._registry: Registry | None = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._registry is not None:
            self._registry.stop()
        if self.keep:
            print(f"kept {self.dir} (logs, state) and the run's topics")
            return
        self.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)

    def pipeline(self, build: str, name: str, *args: object) -> Pipeline:
        """`build(name, *args)` (`build` as "module:function") as the job process will import
        it: from a job module written here, named after `name`; its topics created."""
        module_name, function = build.split(":")
        module = write_job(
            self.dir,
            name.replace("-", "_"),
            f"from {module_name} import {function}\n\npipeline = {function}{(name, *args)!r}\n",
        )
        pipeline = import_job(self.dir, module).pipeline
        create_topics(self.bootstrap, pipeline)
        self.topics += [t.name for t in pipeline_topics(pipeline)]
        self.groups += [c.group for c in pipeline.computations.values()]
        return pipeline

    def registry(self) -> str:
        """The URL of a Schema Registry of this workspace's own, started at the first call."""
        if self._registry is None:
            self._registry = Registry(self.dir / "registry")
            self._registry.start(say=lambda _: None)
        return self._registry.url()

    def job(self, pipeline: Pipeline, *computations: str) -> Job:
        """`logwheel run` of a pipeline from `pipeline()` (the given computations, else all),
        with its state and log in this workspace."""
        return Job(
            f"{pipeline.name.replace('-', '_')}:pipeline",
            bootstrap=self.bootstrap,
            state_dir=self.dir / f"state-{pipeline.name}",
            path=self.dir,
            computations=computations,
        )

    def peer_job(
        self,
        peer: str,
        name: str,
        source: str,
        output: str,
        guarantee: str,
        program: Path | None = None,
        **options: str,
    ) -> Job:
        """A peer's program (bench/peers.py) as a job reading `source` and writing `output`
        in consumer group `name`, with its state and log in this workspace."""
        from bench import peers

        state = self.dir / f"state-{name}"
        job = Job(peer, bootstrap=self.bootstrap, state_dir=state, path=self.dir)
        job.args = peers.command(
            peer,
            program,
            bootstrap=self.bootstrap,
            input=source,
            output=output,
            group=name,
            state_dir=str(state),
            guarantee=guarantee,
            **options,
        )
        return job

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        futures = self.admin.create_topics([NewTopic(n, partitions, 1) for n in names])
        for future in futures.values():
            future.result(30)
        self.topics += names

    def cleanup(self) -> None:
        """Delete the run's topics and consumer groups (best effort). A group whose static
        member (KIP-345) has not timed out yet is not empty and stays: it holds no data."""
        for what, names, delete in (
            ("topic", sorted(set(self.topics)), self.admin.delete_topics),
            ("group", sorted(set(self.groups)), self.admin.delete_consumer_groups),
        ):
            if not names:
                continue
            for name, future in delete(names).items():
                try:
                    future.result(30)
                except confluent_kafka.KafkaException as error:
                    if error.args[0].code() not in (
                        KafkaError.NON_EMPTY_GROUP,
                        KafkaError.GROUP_ID_NOT_FOUND,
                    ):
                        print(f"cleanup: deleting {what} {name}: {error}", file=sys.stderr)


def interleave(
    repeat: int, kinds: Sequence[str], measure: Callable[[str, int], T], line: Callable[[T], str]
) -> dict[str, list[T]]:
    """`measure(kind, attempt)` for every kind, `repeat` times, interleaved so that a change of
    the machine's load touches them all alike; prints `line(result)` for each."""
    results: dict[str, list[T]] = {kind: [] for kind in kinds}
    for attempt in range(repeat):
        for kind in kinds:
            results[kind].append(result := measure(kind, attempt))
            print(f"  {kind:24} run {attempt + 1}: {line(result)}", flush=True)
    return results


# -- following topics, threads, processes ----------------------------------------------------


def follow(bootstrap: str, topics: Iterable[str], **config: object) -> Consumer:
    """A read_committed consumer of every partition of `topics` from the start, outside any
    group (nothing committed); `config` adds client settings."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("bench-reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            **config,
        }
    )
    assignment = []
    for topic in topics:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
    consumer.assign(assignment)
    return consumer


def records(msgs: Iterable[confluent_kafka.Message]) -> list[confluent_kafka.Message]:
    """The records among consumed messages; partition EOFs skipped, other errors raised."""
    found = []
    for msg in msgs:
        err = msg.error()
        if err is None:
            found.append(msg)
        elif err.code() != KafkaError._PARTITION_EOF:
            raise RuntimeError(f"reading {msg.topic()}: {err}")
    return found


class Worker(threading.Thread):
    """A daemon thread running `work()` until `stop` is set; what it raises is kept in `error`
    for the main thread to report (`check`)."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name=type(self).__name__)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error

    def work(self) -> None:
        raise NotImplementedError


class Scraper(Worker):
    """Scrapes a process's Prometheus endpoint every `interval` seconds while in a `with`
    block, as Prometheus would (more often than its 15 s default), so that serving metrics is
    paid for in a measurement. Until the endpoint answers, a failed scrape is not an error."""

    def __init__(self, port: int | str, interval: float = 1.0) -> None:
        super().__init__()
        self.url, self.interval, self.scrapes = f"http://127.0.0.1:{port}/metrics", interval, 0

    def work(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    response.read()
                self.scrapes += 1
            except OSError:
                if self.scrapes:
                    raise

    def __enter__(self) -> Scraper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()
        if self.error is not None:
            raise RuntimeError(f"scraping {self.url} failed: {self.error!r}")


def check(job: Job, *workers: Worker, deadline: float = math.inf, what: str = "") -> None:
    """Raise if a worker failed, the job exited, or `deadline` (monotonic) has passed."""
    for worker in workers:
        if worker.error is not None:
            raise RuntimeError(f"{worker.name} failed: {worker.error!r}")
    why = "the job exited early" if not job.alive() else None
    if why is None and time.monotonic() > deadline:
        why = f"timed out waiting for {what or 'the job'}"
    if why is not None:
        raise RuntimeError(why + "\n" + "\n".join(job.output().splitlines()[-30:]))


def wait_until(
    predicate: Callable[[], object], timeout: float, job: Job, *workers: Worker, fail: bool = True
) -> bool:
    """Wait for `predicate`, checking the job and workers; on timeout raise, or return False
    if not `fail`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if not fail and time.monotonic() > deadline:
            return False
        check(job, *workers, deadline=deadline)
        time.sleep(0.05)
    return True


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (Linux /proc)."""
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        found.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident memory (VmHWM) of a process and its descendants, summed, in MB (Linux
    /proc; None elsewhere)."""
    if not Path(f"/proc/{pid}/status").exists():
        return None
    total = 0
    for p in _tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1024


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time so far of a process and its descendants, all threads (Linux
    /proc; None elsewhere)."""
    if not Path(f"/proc/{pid}/stat").exists():
        return None
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


GATE_TIMEOUT_MS = 900_000  # the broker's default transaction.max.timeout.ms


class Gate:
    """A topic pre-filled with a benchmark's input inside a transaction: what was sent before
    `warmed()` is readable at once, the rest only once `open()` commits it, so that a
    contender's start-up (imports, group join, restore) stays outside the measurement."""

    def __init__(self, bootstrap: str) -> None:
        config = producer_config(bootstrap, transactional_id=unique_name("bench-gate"))
        config["transaction.timeout.ms"] = GATE_TIMEOUT_MS
        self.producer = Producer(config)
        self.producer.init_transactions(30)
        self.producer.begin_transaction()

    def send(self, topic: str, value: bytes, key: bytes, **kwargs: int) -> None:
        while True:
            try:
                return self.producer.produce(topic, value, key, **kwargs)
            except BufferError:
                self.producer.poll(0.05)

    def warmed(self) -> None:
        """Commit what was sent (the warm-up records); what follows waits for `open()`."""
        self.producer.commit_transaction(30)
        self.producer.begin_transaction()

    def open(self) -> None:
        self.producer.commit_transaction(60)

    def close(self) -> None:
        """Abort the input if it was never opened (a failed run)."""
        with contextlib.suppress(confluent_kafka.KafkaException):
            self.producer.abort_transaction(10)


def fmt(value: float | None, spec: str) -> str | None:
    """A table cell: `value` formatted by `spec`, None (an empty cell) where there is none."""
    return None if value is None else format(value, spec)
