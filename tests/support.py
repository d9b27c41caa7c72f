"""Helpers for tests that run real `logwheel run` processes against a real broker."""

from __future__ import annotations

import collections
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

REPO = Path(__file__).resolve().parents[1]
TRANSACTIONS_LOG4J = f"-Dlog4j2.configurationFile={REPO / 'ops' / 'log4j2-transactions.properties'}"
"""A test broker's JVM option: its log says what explains a hanging transaction or a stall
(the transaction coordinator, leadership changes, fencing), beside its warnings."""


def maven_classpath(project: Path, jar: Path) -> str:
    """The Java classpath (`jar` and its copied dependencies) of the Maven project in
    `project`, whose build writes `jar`: built first (`mvn -q package
    dependency:copy-dependencies`) when a file of the project is newer than the jar, unless a
    build of the same files is kept in the user's cache (tests/support_build_cache.py). Builds
    of the same jar wait for each other (test files run side by side, and beside the
    benchmarks)."""
    from tests import support_build_cache

    jar.parent.mkdir(parents=True, exist_ok=True)
    with open(jar.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released with the file
        newest = max(p.stat().st_mtime for p in project.rglob("*") if p.is_file())
        if not jar.exists() or jar.stat().st_mtime < newest:
            if not support_build_cache.restore(project, jar):
                print(f"building {jar} with Maven", file=sys.stderr, flush=True)
                shutil.rmtree(jar.parent / "dependency", ignore_errors=True)  # no stale versions
                subprocess.run(
                    ["mvn", "-q", "-f", str(project / "pom.xml"), "package"]
                    + ["dependency:copy-dependencies"],
                    check=True,
                    stdout=sys.stderr,
                )
                support_build_cache.keep(project, jar)
            jar.touch()  # Maven leaves a jar whose classes did not change as it was
    return f"{jar}{os.pathsep}{jar.parent / 'dependency'}{os.sep}*"


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def write_job(directory: Path, module: str, source: str) -> str:
    """Write a job module into `directory` (put on PYTHONPATH by `Job`); returns its name."""
    (directory / f"{module}.py").write_text(source)
    return module


def job_source(template: str, **constants: object) -> str:
    """A job module: `template` (which builds `pipeline`) after the constants it reads."""
    lines = [f"{name} = {value!r}" for name, value in constants.items()]
    return "\n".join(lines) + "\n" + template


class UniqueJob:
    """A pipeline built by `factory(name, stream_prefix, *args)` under a fresh name (streams are
    named globally), written as a job module `logwheel run` can import, its topics created."""

    def __init__(
        self,
        bootstrap: str,
        directory: Path,
        factory: str,
        prefix: str,
        *args,
        kafka: dict | None = None,
        create: bool = True,
    ) -> None:
        from framework.kafka.topics import create_topics

        self.bootstrap, self.directory = bootstrap, directory
        self.name = unique_name(prefix)
        self.prefix = f"{self.name}-"
        module, function = factory.split(":")
        call = ", ".join(repr(a) for a in (self.name, self.prefix, *args))
        source = f"from {module} import {function}\npipeline = {function}({call})\n"
        self.module = write_job(directory, self.name.replace("-", "_"), source)
        self.pipeline = import_job(directory, self.module).pipeline
        if create:
            create_topics(bootstrap, self.pipeline, client_config=kafka)

    def job(self, state: str = "state", **kwargs) -> Job:
        return Job(
            f"{self.module}:pipeline",
            bootstrap=self.bootstrap,
            state_dir=self.directory / state,
            path=self.directory,
            **kwargs,
        )


class Job:
    """A `logwheel run` process: started, killed, stopped and resumed for real."""

    def __init__(
        self,
        ref: str,
        *,
        bootstrap: str,
        state_dir: Path,
        path: Path,
        computations: Iterable[str] = (),
        log: Path | None = None,
        config: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = [sys.executable, "-m", "framework.cli", "run", ref, "--bootstrap", bootstrap]
        self.args += ["--state-dir", str(state_dir)]
        for name in computations:
            self.args += ["--computation", name]
        if config is not None:
            self.args += ["--config", str(config)]
        self.env = {**os.environ, **(env or {}), "PYTHONPATH": f"{path}{os.pathsep}{REPO}"}
        self.log = log or state_dir.with_suffix(".log")
        self.proc: subprocess.Popen | None = None
        self.log_start = 0

    def start(self) -> Job:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log_start = self.log.stat().st_size if self.log.exists() else 0
        out = open(self.log, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=out, stderr=out, cwd=REPO)
        out.close()
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout: float = 60) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_working(self, computations: int = 1, timeout: float = 60) -> Job:
        """Wait until this incarnation's computations hold their partitions (each logs
        "assigned"); fails if the job died instead."""
        wait_for(
            lambda: (
                self.output(this_start=True).count("assigned") >= computations or not self.alive()
            ),
            timeout,
            what="the job to take its partitions",
        )
        assert self.alive(), self.output()[-3000:]
        return self

    def output(self, *, this_start: bool = False) -> str:
        """What the job printed (since its latest start, if `this_start`)."""
        if not self.log.exists():
            return ""
        raw = self.log.read_bytes()
        return raw[self.log_start if this_start else 0 :].decode(errors="replace")


def start_job(directory: Path, module: str, bootstrap: str, computations: int = 1) -> Job:
    """`logwheel run MODULE:pipeline` for a module written by `write_job`, once it holds its
    partitions."""
    job = Job(
        f"{module}:pipeline", bootstrap=bootstrap, state_dir=directory / "state", path=directory
    )
    return job.start().wait_working(computations)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[str | None, object, int | None]],
    kafka: dict | None = None,
) -> int:
    """Produce (key, JSON value, timestamp) records, in order within each partition (a retry
    under load must not reorder them: tests compare offset order with timestamp order);
    returns how many. `kafka`: extra client settings (SASL, SSL, ...)."""
    producer = Producer(
        {
            **(kafka or {}),
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
        }
    )
    n = 0
    for key, value, ts in records:
        kwargs = {} if ts is None else {"timestamp": ts}
        while True:
            try:
                producer.produce(
                    topic,
                    json.dumps(value).encode(),
                    None if key is None else key.encode(),
                    **kwargs,
                )
                break
            except BufferError:
                producer.poll(0.1)
        n += 1
    producer.flush(60)
    return n


def read_topic(
    bootstrap: str,
    topic: str,
    *,
    expect: int | None = None,
    timeout: float = 60,
    idle: float = 3.0,
    committed: bool = True,
    kafka: dict | None = None,
    to_end: bool = False,
) -> list:
    """Every record of `topic` from the start (read_committed unless `committed=False`):
    until `expect` records, or until nothing new came for `idle` seconds, or `timeout`.
    `to_end`: until every partition reached its end (its last stable offset under
    read_committed), after `expect` records if given, instead of waiting `idle` seconds: what
    was committed by then, duplicates included. `kafka`: extra client settings (SASL, SSL,
    ...)."""
    consumer = Consumer(
        {
            **(kafka or {}),
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("reader"),
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.partition.eof": to_end,
        }
    )
    meta = consumer.list_topics(topic, timeout=30).topics[topic]
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
    records, deadline, last = [], time.monotonic() + timeout, time.monotonic()
    ended: set[int] = set()
    try:
        while time.monotonic() < deadline:
            enough = expect is None or len(records) >= expect
            if enough and (len(ended) == len(meta.partitions) if to_end else expect is not None):
                break
            if expect is None and not to_end and time.monotonic() - last > idle:
                break
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None:
                    records.append(msg)
                    ended.discard(msg.partition())
                    last = time.monotonic()
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(msg.partition())
                else:
                    raise RuntimeError(msg.error())
    finally:
        consumer.close()
    return records


def wait_for(predicate, timeout: float = 60, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Wordcount:
    """The wordcount job under a unique name, with its input and the truth to check against."""

    VOCABULARY = [f"w{i}" for i in range(200)]

    def __init__(
        self,
        bootstrap: str,
        tmp: Path,
        guarantee: str = "exactly_once",
        *,
        kafka: dict | None = None,
        create: bool = True,
        factory: str = "jobs.wordcount:build",
        extra: tuple = (),
    ) -> None:
        """`kafka`: client settings of the test's own clients (topics, input, reading);
        `create=False` leaves every topic to the job; `factory(name, prefix, guarantee,
        *extra)` builds the pipeline (tests.backfill_faults: one that fails on purpose)."""
        self.bootstrap, self.kafka = bootstrap, kafka
        self.unique = UniqueJob(
            bootstrap, tmp, factory, "wc", guarantee, *extra, kafka=kafka, create=create
        )
        self.name, self.prefix, self.pipeline = (
            self.unique.name,
            self.unique.prefix,
            self.unique.pipeline,
        )
        self.lines_topic = f"{self.prefix}lines"
        self.counts_topic = f"{self.prefix}word-counts"
        self.words: dict[str, int] = {}
        self.sent = 0

    def job(self, instance: str = "a", **kwargs) -> Job:
        return self.unique.job(f"state-{instance}", **kwargs)

    def send_lines(self, n: int, seed: int = 0) -> None:
        import random

        rng = random.Random(seed + self.sent)
        batch = []
        for i in range(self.sent, self.sent + n):
            words = [rng.choice(self.VOCABULARY) for _ in range(rng.randint(1, 5))]
            for w in words:
                self.words[w] = self.words.get(w, 0) + 1
            batch.append((str(i), {"line": " ".join(words)}, None))
        self.sent += n
        produce(self.bootstrap, self.lines_topic, batch, self.kafka)

    def total(self) -> int:
        return sum(self.words.values())

    def read_counts(self, timeout: float = 120, expect: int | None = None) -> list[tuple[str, int]]:
        """The committed counts, once `expect` (default: one per word seen) have come, read on
        to the output's end: every duplicate committed by then too."""
        from framework.serde.catalogue import decoder_for

        decode = decoder_for("wordcount.WordCount")
        msgs = read_topic(
            self.bootstrap,
            self.counts_topic,
            expect=expect or self.total(),
            timeout=timeout,
            kafka=self.kafka,
            to_end=True,
        )
        return [(v["word"], v["count"]) for v in (decode(m.value()) for m in msgs)]

    def check_exact(self, counts: list[tuple[str, int]], times: int = 1) -> None:
        """Per word, the updates are exactly 1, 2, ..., n (`times` over, after resets that
        counted again from scratch): no duplicate, none missing."""
        seen: dict[str, list[int]] = {}
        for word, count in counts:
            seen.setdefault(word, []).append(count)
        assert set(seen) == set(self.words), "words missing or invented"
        for word, n in self.words.items():
            assert sorted(seen[word]) == sorted(list(range(1, n + 1)) * times), (
                f"{word}: expected updates 1..{n}, got {len(seen[word])} "
                f"(max {max(seen[word])}, duplicates {len(seen[word]) - len(set(seen[word]))})"
            )


def kafka_results(msgs) -> collections.Counter:
    """JSON records read from Kafka as a multiset of (key, value as sorted JSON, timestamp),
    to compare with `harness_results` of the Harness's outputs."""
    return collections.Counter(
        (m.key().decode(), json.dumps(json.loads(m.value()), sort_keys=True), m.timestamp()[1])
        for m in msgs
    )


def harness_results(records) -> collections.Counter:
    """The Harness's output records, as `kafka_results` gives Kafka's."""
    return collections.Counter(
        (r.key, json.dumps(r.value, sort_keys=True), r.timestamp) for r in records
    )


def import_job(directory: Path, module: str):
    """Import a job module written by `write_job`, so the test uses the very pipeline object
    the `logwheel run` process imports (for injectors, topic names and decoding)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(module, directory / f"{module}.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


def read_marks(bootstrap: str, channel: str, **kwargs) -> list:
    """Every committed mark (`framework.core.watermarks.Mark`) on a watermark channel, in order."""
    from framework.core.watermarks import decode_mark

    msgs = read_topic(bootstrap, channel, **kwargs)
    return [decode_mark(m.value()) for m in sorted(msgs, key=lambda m: m.offset()) if m.value()]


def json_values(msgs: list) -> list:
    """The JSON values of records read with `read_topic`."""
    return [json.loads(m.value()) for m in msgs]


def wait_until_resettable(
    pipeline, computation: str, bootstrap: str, state_dir: Path, kafka: dict | None = None
) -> None:
    """Wait until `logwheel reset` accepts the computation: its stopped (static) members'
    sessions have ended."""
    from framework.core.pipeline import PipelineError
    from framework.ops.reset import reset

    def resettable() -> bool:
        try:
            reset(pipeline, computation, "earliest", bootstrap=bootstrap, state_dir=state_dir,
                  dry_run=True, kafka=kafka)  # fmt: skip
        except PipelineError:
            return False
        return True

    wait_for(resettable, 60, what="the stopped members' sessions to end")


def raise_bare(error: KafkaError) -> None:
    """Raise `error` itself, as confluent-kafka's C code does from some calls (a consumer's
    `close`, a fenced producer's `flush`): a KafkaError is no BaseException, so Python code
    cannot raise it, and `except Exception`/`except KafkaException` let it through.

    CPython then writes an exception's fields (traceback, context) into the KafkaError object
    and reads them back from it: undefined behaviour, which once crashed the pytest worker
    running such a test. Call it only inside `in_forked_child`."""
    set_object = ctypes.pythonapi.PyErr_SetObject
    set_object.argtypes = [ctypes.py_object, ctypes.py_object]
    set_object(KafkaError, error)  # ctypes' pythonapi raises what the call left set


def in_fresh_process(scenario: Callable[..., None], *args: str, timeout: float = 120) -> None:
    """Run `scenario(*args)`, a module-level function of the tests, in a Python process of its
    own; fail with its output if it fails or dies. For scenarios that raise a bare KafkaError
    (`raise_bare`): what that does to memory stays in that process. (A fork of the pytest
    process was tried: it inherited locks held by other threads and hung.)"""
    run = "import importlib, sys; m = importlib.import_module(sys.argv[1]); "
    run += "getattr(m, sys.argv[2])(*sys.argv[3:])"
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", run, scenario.__module__, scenario.__qualname__, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"the scenario failed in its process (exit {done.returncode}):\n{done.stderr[-3000:]}"
    )
