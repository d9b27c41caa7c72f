"""`logwheel rescale` on a real broker and Spark local: a re-keyed computation with state,
event-time timers and dedup ids, stopped mid-input with records waiting in its `.by-key` topic
and on its source, rescaled 4 -> 8 and (LOGWHEEL_CHAOS_FULL=1, `make chaos`) 8 -> 3, one of
them interrupted and run again; after each, `run` with the new declaration goes on with the
rest of the input.
In the end every key's outputs are what one run over the whole input gives: each click counted
once in order, each timer fired once, the duplicates of clicks seen before a rescale dropped
after it. One Spark session serves the module's rescales (the killed one has its own process).

The records waiting in the `.by-key` topic are written there as the re-keying task writes them
(key, partition, value, timestamp, id header), after the job stopped: what a computation stopped
between re-keying and processing leaves, at a point chosen by the test, not by timing."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from framework.backfill.session import session
from framework.core.pipeline import PipelineError
from framework.kafka.collector import ID_HEADER
from framework.kafka.partitioning import key_partition
from framework.kafka.topics import create_part_topics, create_topics
from framework.rescale.command import rescale
from tests.integration.dedup_clicks import counted, send_clicks
from tests.support import (
    REPO,
    Job,
    import_job,
    job_source,
    read_topic,
    wait_until_resettable,
    write_job,
)

pytestmark = pytest.mark.timeout(900)
FULL = os.environ.get("LOGWHEEL_CHAOS_FULL") == "1"

T0 = 1_700_000_000_000
STEP = 100  # ms between clicks; a click's timer is 500 ms after it
JOB = """
from framework import BoundedOutOfOrderness, Computation, Dedup, Pipeline, key_by


class Clicks(Computation):
    def process_record(self, ctx, record):
        n = ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.produce(OUT, {"user": ctx.key, "click": record.value["click"], "n": n})
        ctx.set_timer("t" + record.value["click"], record.timestamp + 500)

    def process_timer(self, ctx, timer):
        ctx.produce(OUT, {"user": ctx.key, "timer": timer.tag})


pipeline = Pipeline(NAME, partitions=PARTITIONS)
pipeline.source(CLICKS, watermark=BoundedOutOfOrderness(ms=0, idle_ms=600_000))
pipeline.computation("count", Clicks, inputs={CLICKS: key_by("user")}, outputs={OUT: None},
                     dedup=Dedup())
"""


class Input:
    """The clicks sent so far, in order, with their timestamps."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.i = 0

    def clicks(self, n: int, dups: int = 0) -> list[tuple[str, str, int]]:
        """`n` new clicks of 12 users, then `dups` re-sends of clicks sent before."""
        out = []
        for _ in range(n):
            self.i += 1
            out.append((f"u{(self.i * 7) % 12}", f"c{self.i}"))
        out += self.sent[: dups * 3 : 3]
        self.sent += out
        stamped = []
        for user, click in out:
            self.i += 1
            stamped.append((user, click, T0 + self.i * STEP))
        return stamped


def pend(kafka: str, topic: str, partitions: int, clicks: list[tuple[str, str, int]]) -> None:
    """Records as the re-keying task writes them to the `.by-key` topic, left unread."""
    producer = Producer({"bootstrap.servers": kafka, "enable.idempotence": True})
    for user, click, ts in clicks:
        value = json.dumps({"user": user, "click": click}).encode()
        producer.produce(topic, value, user.encode(), partition=key_partition(user, partitions),
                         timestamp=ts, headers=[(ID_HEADER, click.encode())])  # fmt: skip
    assert producer.flush(30) == 0


def outputs(kafka: str, out: str, clicks: int, timers: int = 0) -> list[dict]:
    """The outputs once at least `clicks` click outputs and `timers` timer outputs are there
    (read to the end, read_committed, again until then)."""
    deadline = time.monotonic() + 120
    while True:
        msgs = read_topic(kafka, out, to_end=True)
        got = [
            json.loads(m.value()) for m in sorted(msgs, key=lambda m: (m.partition(), m.offset()))
        ]
        fired = sum("timer" in v for v in got)
        if len(got) - fired >= clicks and fired >= timers or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


class Interrupted(Exception):  # noqa: N818 - what the test does to the rescale
    """Raised by `on_step` in the middle of the switch: the old topics are already deleted."""


def interrupt_at(step: str):
    def on_step(reached: str) -> None:
        if reached == step:
            raise Interrupted(step)

    return on_step


@pytest.mark.skipif(
    not (FULL or os.environ.get("LOGWHEEL_TEST_RESCALE") == "1"),
    reason="make chaos runs it (two Spark rescales, 75-90 s of make test's time): opt in with "
    "LOGWHEEL_TEST_RESCALE=1",
)
@pytest.mark.parametrize("full", [pytest.param(FULL, id="full" if FULL else "reduced")])
def test_rescale_goes_on_as_if_it_had_always_had_that_count(kafka, tmp_path, unique, full):
    """Reduced (make test): 4 -> 8, interrupted in the middle of the switch (old topics deleted)
    and run again. Full (LOGWHEEL_CHAOS_FULL=1): 4 -> 8, then 8 -> 3 SIGKILLed after staging
    (the old topics untouched) and run again."""
    name = unique("rescale")
    clicks_topic, out = f"{name}-clicks", f"{name}-out"
    refs, pipelines = {}, {}
    for n in (4, 8, 3):
        source = job_source(JOB, NAME=name, CLICKS=clicks_topic, OUT=out, PARTITIONS=n)
        module = write_job(tmp_path, f"{name.replace('-', '_')}_{n}", source)
        refs[n], pipelines[n] = f"{module}:pipeline", import_job(tmp_path, module).pipeline
    create_topics(kafka, pipelines[4])
    state = tmp_path / "state"
    stream = Input()
    by_key = pipelines[4]["count"].by_key(clicks_topic)
    admin = AdminClient({"bootstrap.servers": kafka})

    def run(n: int, clicks: int, timers: int = 0, last: bool = False) -> list[dict]:
        job = Job(refs[n], bootstrap=kafka, state_dir=state, path=tmp_path).start()
        try:
            got = outputs(kafka, out, clicks, timers)
        finally:
            assert job.stop() == 0, job.output()[-3000:]
        if not last:  # a rescale follows
            wait_until_resettable(pipelines[n], "count", kafka, state)
        return got

    def verified(lines: list[str]) -> None:
        print("\n".join(lines))
        checks = [line for line in lines if "checksums differ" in line]
        assert checks and all(": 0 keys " in c and c.endswith("OK") for c in checks)

    send_clicks(kafka, clicks_topic, stream.clicks(60, dups=5))
    got = run(4, len(set(stream.sent)))
    assert sum("click" in v for v in got) == len(set(stream.sent))

    spark = session("local[2]", "logwheel-test-rescale")
    spark.conf.set("spark.sql.shuffle.partitions", "2")  # small data: two tasks a shuffle
    try:
        # stopped mid-input: clicks re-keyed but unread, and clicks on the source unread
        pend(kafka, by_key, 4, stream.clicks(20, dups=4))
        send_clicks(kafka, clicks_topic, stream.clicks(20, dups=4))
        if not full:
            with pytest.raises(Interrupted):
                rescale(pipelines[8], "count", 8, bootstrap=kafka, spark=spark,
                        on_step=interrupt_at("deleted"))  # fmt: skip
            assert by_key not in admin.list_topics(timeout=30).topics
        verified(rescale(pipelines[8], "count", 8, bootstrap=kafka, spark=spark))
        assert len(admin.list_topics(timeout=30).topics[by_key].partitions) == 8
        with pytest.raises(PipelineError, match="logwheel rescale .* --partitions 4"):
            create_part_topics(kafka, pipelines[4], "count", {})  # what `run` does at start
        final = 8
        if full:
            send_clicks(kafka, clicks_topic, stream.clicks(20, dups=10))
            run(8, len(set(stream.sent)))
            pend(kafka, by_key, 8, stream.clicks(20, dups=6))
            send_clicks(kafka, clicks_topic, stream.clicks(20, dups=6))
            killed = subprocess.run(
                [sys.executable, "-m", "tests.integration.rescale_killed", refs[3], "count",
                 "3", kafka, "staged"],
                env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"},
                capture_output=True, text=True, timeout=300, cwd=REPO,
            )  # fmt: skip
            assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-3000:]
            assert len(admin.list_topics(timeout=30).topics[by_key].partitions) == 8  # untouched
            verified(rescale(pipelines[3], "count", 3, bootstrap=kafka, spark=spark))
            final = 3
        assert rescale(pipelines[final], "count", final, bootstrap=kafka, spark=spark) == [
            f"{name}.count already has {final} partitions: nothing to do"
        ]
    finally:
        spark.stop()

    send_clicks(kafka, clicks_topic, stream.clicks(10, dups=10))
    last = T0 + (stream.i + 100) * STEP
    end = [(u, f"end-{u}", last) for u in ("zz-a", "zz-c", "zz-m", "zz-b")]
    assert {key_partition(u, 4) for u, _, _ in end} == {0, 1, 2, 3}  # every source partition
    send_clicks(kafka, clicks_topic, end)  # the watermark passes every click's timer
    unique_clicks = list(dict.fromkeys(stream.sent)) + [(u, c) for u, c, _ in end]
    want_records = counted(unique_clicks, dedup=True)
    timers = collections.Counter((u, "t" + c) for u, c in unique_clicks if not u.startswith("zz"))
    got = run(final, len(unique_clicks), sum(timers.values()), last=True)

    per_key: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
    fired: collections.Counter = collections.Counter()
    for v in got:
        if "click" in v:
            per_key[v["user"]].append((v["click"], v["n"]))
        elif not v["user"].startswith("zz"):
            fired[(v["user"], v["timer"])] += 1
    assert dict(per_key) == want_records  # exactly once, in order, duplicates dropped
    assert fired == timers  # each timer fired once, across the rescales
