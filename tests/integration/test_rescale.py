"""`logwheel rescale` on a real broker and Spark local: a re-keyed computation with state,
event-time timers and dedup ids, stopped mid-input with records waiting in its `.by-key` topic
and on its source, rescaled 4 -> 8 and 8 -> 3 (the second one first SIGKILLed after staging,
then run again); after each, `run` with the new declaration goes on with the rest of the input.
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

pytestmark = pytest.mark.timeout(600)

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


def outputs(kafka: str, out: str, expect: int) -> list[dict]:
    msgs = read_topic(kafka, out, expect=expect, timeout=120)
    return [json.loads(m.value()) for m in sorted(msgs, key=lambda m: (m.partition(), m.offset()))]


def test_rescale_4_to_8_to_3_goes_on_as_if_it_always_had_that_count(kafka, tmp_path, unique):
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

    def run(n: int, expect: int) -> list[dict]:
        job = Job(refs[n], bootstrap=kafka, state_dir=state, path=tmp_path).start()
        try:
            got = outputs(kafka, out, expect)
        finally:
            assert job.stop() == 0, job.output()[-3000:]
        wait_until_resettable(pipelines[n], "count", kafka, state)
        return got

    def records(got: list[dict]) -> int:
        return sum("click" in v for v in got)

    send_clicks(kafka, clicks_topic, stream.clicks(60, dups=5))
    got = run(4, len(set(stream.sent)))
    assert records(got) == len(set(stream.sent))

    spark = session("local[2]", "logwheel-test-rescale")
    try:
        # stopped mid-input: clicks re-keyed but unread, and clicks on the source unread
        pend(kafka, by_key, 4, stream.clicks(20, dups=4))
        send_clicks(kafka, clicks_topic, stream.clicks(20, dups=4))
        lines = rescale(pipelines[8], "count", 8, bootstrap=kafka, spark=spark)
        print("\n".join(lines))
        assert any("0 keys whose checksums differ" in line and "OK" in line for line in lines)
        assert len(AdminClient({"bootstrap.servers": kafka}).list_topics(timeout=30)
                   .topics[by_key].partitions) == 8  # fmt: skip
        with pytest.raises(PipelineError, match="logwheel rescale .* --partitions 4"):
            create_part_topics(kafka, pipelines[4], "count", {})  # what `run` does at start

        send_clicks(kafka, clicks_topic, stream.clicks(20, dups=10))
        got = run(8, records(got) + len(set(stream.sent)) - records(got))

        pend(kafka, by_key, 8, stream.clicks(20, dups=6))
        send_clicks(kafka, clicks_topic, stream.clicks(20, dups=6))
        killed = subprocess.run(
            [sys.executable, "-m", "tests.integration.rescale_killed", refs[3], "count", "3",
             kafka, "staged"],
            env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"},
            capture_output=True, text=True, timeout=300, cwd=REPO,
        )  # fmt: skip
        assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-3000:]
        topics = AdminClient({"bootstrap.servers": kafka}).list_topics(timeout=30).topics
        assert len(topics[by_key].partitions) == 8  # the old topics are untouched
        lines = rescale(pipelines[3], "count", 3, bootstrap=kafka, spark=spark)
        print("\n".join(lines))
        assert rescale(pipelines[3], "count", 3, bootstrap=kafka, spark=spark) == [
            f"{name}.count already has 3 partitions: nothing to do"
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
    got = run(3, len(unique_clicks) + sum(timers.values()))

    per_key: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
    fired: collections.Counter = collections.Counter()
    for v in got:
        if "click" in v:
            per_key[v["user"]].append((v["click"], v["n"]))
        elif not v["user"].startswith("zz"):
            fired[(v["user"], v["timer"])] += 1
    assert dict(per_key) == want_records  # exactly once, in order, duplicates dropped
    assert fired == timers  # each timer fired once, across both rescales
