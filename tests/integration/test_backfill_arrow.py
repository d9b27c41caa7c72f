"""The backfill's Arrow path (mapInArrow) against its row path (pickled rows) on the same
inputs, on a real broker and a real Spark: the row path backfills, `reset --wipe-state` puts
the computation back at the start, the Arrow path backfills again, and the outputs, dead
letters, changelog, timer journal and the group's committed offsets are identical, record for
record. CountWords (keyed by the producer, bad records dead-lettered by the task), zeitgeist's
windowed count (re-keyed by a key extractor, event-time timers left pending) and enrich's
profiles (re-keyed, deletions, bad records dead-lettered before the shuffle).

The enrich join itself reads a table, which the backfill refuses on either path."""

from __future__ import annotations

import collections
import json
import random

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from framework.backfill.driver import backfill
from framework.backfill.plan import PLAN_KEY, Plan, backfill_topic
from framework.backfill.session import session
from framework.backfill.stored_plan import read_backfill_topic
from framework.ops.reset import reset
from framework.testing import Harness
from tests.integration.test_backfill import T0, inject, queries, windows_job
from tests.support import UniqueJob, Wordcount, produce, read_topic

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def spark():
    spark = session("local[2]", "logwheel-test-backfill-arrow")
    yield spark
    spark.stop()


def test_the_session_keeps_arrow_batches_small_and_compiles_with_c1_only(spark):
    """Spark measures an Arrow batch after every row, in time that grows with the batch when
    it holds the headers' nested column: batches of 100 rows, Spark's 64 MB bound kept; C2's
    compiling was most of a backfill's JVM CPU (`framework.backfill.session`)."""
    assert spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == "100"
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.sql.execution.arrow.maxBytesPerBatch") is None  # Spark's 64 MB
    for side in ("driver", "executor"):
        assert "-XX:TieredStopAtLevel=1" in conf.get(f"spark.{side}.extraJavaOptions")


def messages(kafka: str, topic: str, expect: int | None = None) -> collections.Counter:
    """A topic's committed records as a multiset of (partition, key, value, headers); the
    timestamp too where the record carries event time (not on journals, stamped when sent)."""
    msgs = read_topic(kafka, topic, expect=expect, timeout=90, idle=2)
    journal = topic.endswith((".changelog", ".timers", ".dlq"))
    return collections.Counter(
        (m.partition(), m.key(), m.value(), tuple(m.headers() or ()))
        + (() if journal else (m.timestamp()[1],))
        for m in msgs
    )


def committed(kafka: str, spec) -> dict:
    plan = Plan.from_json(read_backfill_topic(kafka, backfill_topic(spec))[PLAN_KEY])
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": spec.group})
    try:
        tps = [TopicPartition(r.topic, r.partition) for r in plan.ranges]
        return {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(tps, 30)}
    finally:
        consumer.close()


def assert_paths_agree(kafka, tmp_path, pipeline, computation: str, spark) -> None:
    spec = pipeline[computation]
    appended = [*spec.outputs, spec.dlq]  # written again by the second backfill
    rewritten = [spec.changelog, spec.timers]  # emptied by reset --wipe-state

    rows = backfill(pipeline, computation, bootstrap=kafka, spark=spark, arrow=False)
    before = {t: messages(kafka, t) for t in appended + rewritten}
    offsets = committed(kafka, spec)
    assert rows.records_in > 0 and sum(map(len, before.values())) > 0
    reset(pipeline, computation, "earliest", bootstrap=kafka, state_dir=tmp_path / "x",
          wipe_state=True)  # fmt: skip

    arrow = backfill(pipeline, computation, bootstrap=kafka, spark=spark, arrow=True)

    counts = ("records_in", "records_out", "keys", "dead_letters", "late")
    assert [getattr(arrow, c) for c in counts] == [getattr(rows, c) for c in counts]
    for topic in appended:
        every = messages(kafka, topic, expect=2 * before[topic].total())
        assert every - before[topic] == before[topic], topic
    for topic in rewritten:
        assert messages(kafka, topic, expect=before[topic].total()) == before[topic], topic
    assert committed(kafka, spec) == offsets


def test_count_words_with_bad_records_is_the_same_on_arrow(kafka, tmp_path, spark):
    wc = Wordcount(kafka, tmp_path)
    rng = random.Random(5)
    words = [rng.choice(Wordcount.VOCABULARY[:50]) for _ in range(1200)]
    produce(kafka, f"{wc.prefix}words", [(w, {"word": w}, T0 + i) for i, w in enumerate(words)])
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(f"{wc.prefix}words", b"\x00\xffnot json", b"w1", timestamp=T0 + 5)
    producer.produce(f"{wc.prefix}words", b'{"word": "x"}', b"\xff\xfe", timestamp=T0 + 6)
    producer.flush(30)

    assert_paths_agree(kafka, tmp_path, wc.pipeline, "count-words", spark)


def test_a_windowed_count_rekeyed_with_pending_timers_is_the_same_on_arrow(
    kafka, tmp_path, spark, unique
):
    pipeline, stream, _, _ = windows_job(tmp_path, unique)
    records = queries(random.Random(9), 600, T0)
    inject(pipeline, kafka, stream, Harness(pipeline, "window-counter"), records,
           records[-1][1] - 3_000)  # fmt: skip
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(stream, b"\x00\xffnot json", None, timestamp=records[-1][1])
    producer.flush(30)

    assert_paths_agree(kafka, tmp_path, pipeline, "window-counter", spark)


def test_enrich_profiles_rekeyed_with_deletions_and_bad_records_are_the_same_on_arrow(
    kafka, tmp_path, spark
):
    job = UniqueJob(kafka, tmp_path, "jobs.enrich:build", "enrich")
    rng = random.Random(11)
    updates = []
    for i in range(400):
        user = f"u{rng.randrange(30)}"
        update = {"user": user, "delete": True} if i % 37 == 0 else {"user": user, "name": f"n{i}"}
        updates.append((None, update, T0 + i))
    produce(kafka, f"{job.prefix}profile-updates", updates)
    producer = Producer({"bootstrap.servers": kafka})
    topic = f"{job.prefix}profile-updates"
    producer.produce(topic, b"\x00\xffnot json", timestamp=T0 + 500)  # decode
    producer.produce(topic, json.dumps({"name": "nobody"}).encode(), timestamp=T0 + 501)  # key
    producer.flush(30)

    assert_paths_agree(kafka, tmp_path, job.pipeline, "profiles", spark)
