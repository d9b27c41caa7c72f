"""`logwheel backfill` on a real broker and a real Spark (local mode, one session for the
module, task retries allowed): the same outputs and state as streaming and the Harness, a
hand-over to `logwheel run` with per-word counts exactly 1..n, bad input dead-lettered, and
every output seen once by read_committed readers across a failed Spark task and a backfill
killed with SIGKILL and run again."""

from __future__ import annotations

import collections
import ipaddress
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from changelog import ChangelogTable
from framework.backfill.driver import backfill
from framework.backfill.plan import (
    PLAN_KEY,
    Plan,
    PlanError,
    Range,
    backfill_topic,
    backfill_topic_spec,
    done_key,
)
from framework.backfill.session import session
from framework.backfill.stored_plan import read_backfill_topic, write_plan
from framework.core.pipeline import PipelineError
from framework.kafka.collector import ID_HEADER
from framework.kafka.topics import ensure_topics
from framework.ops.reset import reset
from framework.serde.catalogue import decoder_for
from framework.streaming.injector import Injector
from framework.testing import Harness
from tests import support_joins as joins
from tests.support import (
    REPO,
    Job,
    UniqueJob,
    Wordcount,
    harness_results,
    import_job,
    job_source,
    json_values,
    kafka_results,
    produce,
    read_topic,
    wait_for,
    wait_until_resettable,
    write_job,
)
from tests.support_spark import listening_addresses, rpc_connects

pytestmark = pytest.mark.timeout(900)

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark():
    # two cores, up to three attempts per task: a task that fails is retried
    spark = session("local[2,3]", "logwheel-test-backfill")
    yield spark
    spark.stop()


def state_of(bootstrap: str, changelog: str) -> dict:
    with ChangelogTable(changelog, bootstrap=bootstrap) as table:
        return dict(table.catch_up(progress=False).items())


def produced(msgs: list, decode) -> collections.Counter:
    """Outputs as a multiset of (partition, key, value, timestamp, id)."""
    return collections.Counter(
        (
            m.partition(),
            m.key().decode(),
            repr(sorted(decode(m.value()).items())),
            m.timestamp()[1],
            dict(m.headers() or ()).get(ID_HEADER),
        )
        for m in msgs
    )


# -- equivalence ------------------------------------------------------------------------------


def test_count_stage_equals_a_streaming_run(kafka, tmp_path, spark):
    """Streaming counts the words; reset --wipe-state; the backfill counts them again: the
    same outputs (partitions, keys, values, timestamps, ids) and the same final state.

    Each partition's words are in timestamp order, as the backfill processes a key's records
    (streaming: in offset order; the two agree on such input)."""
    wc = Wordcount(kafka, tmp_path)
    rng = random.Random(3)
    words = [rng.choice(Wordcount.VOCABULARY[:60]) for _ in range(1500)]
    produce(kafka, f"{wc.prefix}words", [(w, {"word": w}, T0 + i) for i, w in enumerate(words)])
    job = wc.job(computations=["count-words"]).start()
    changelog = f"{wc.name}.count-words.changelog"
    try:
        streamed = read_topic(kafka, wc.counts_topic, expect=len(words), timeout=120)
        wait_for(lambda: len(state_of(kafka, changelog)) == len(set(words)), 60, what="state")
    finally:
        assert job.stop() == 0
    decode = decoder_for("wordcount.WordCount")
    streamed_state = state_of(kafka, changelog)
    wait_until_resettable(wc.pipeline, "count-words", kafka, tmp_path / "state-a")
    reset(wc.pipeline, "count-words", "earliest", bootstrap=kafka, state_dir=tmp_path / "x",
          wipe_state=True)  # fmt: skip

    summary = backfill(wc.pipeline, "count-words", bootstrap=kafka, spark=spark)

    assert summary.records_in == len(words) and summary.records_out == len(words)
    every = read_topic(kafka, wc.counts_topic, expect=2 * len(words), timeout=120)
    mine = produced(every, decode) - produced(streamed, decode)
    assert mine == produced(streamed, decode)
    assert (
        state_of(kafka, changelog)
        == streamed_state
        == {w: {"count": words.count(w)} for w in set(words)}
    )


def test_the_plans_highs_leave_out_records_beyond_the_skew_allowance(kafka, spark, create_topic):
    """The end watermark follows streaming's (issue 38, finding 3): Spark's highest timestamp
    per partition leaves out a record stamped beyond its source's allowance, and a partition
    holding only such records has none (it is idle)."""
    from confluent_kafka import Producer

    from framework.backfill.frames import max_timestamps
    from framework.backfill.plan import Range

    topic = create_topic(partitions=2)
    now = time.time_ns() // 1_000_000
    producer = Producer({"bootstrap.servers": kafka})
    for partition, ts in [(0, now - 300_000), (0, now + 3_000_000), (0, now - 299_000),
                          (1, now + 3_000_000)]:  # fmt: skip
        producer.produce(topic, b"{}", b"k", partition, timestamp=ts)
    assert producer.flush(30) == 0
    ranges = (Range(topic, 0, 0, 3, topic, True), Range(topic, 1, 0, 1, topic, True))
    highs = max_timestamps(spark, ranges, kafka, {}, {topic: now + 300_000})
    assert highs == {(topic, 0): now - 299_000}
    assert max_timestamps(spark, ranges, kafka, {}, {}) == {
        (topic, 0): now + 3_000_000,
        (topic, 1): now + 3_000_000,
    }


WINDOWS_JOB = """
from framework import InjectorWatermark, Pipeline, windows
from jobs.zeitgeist.computations import query_key

pipeline = Pipeline(NAME)
pipeline.source(QUERIES, schema="zeitgeist.SearchQuery", watermark=InjectorWatermark("gen"))
pipeline.windowed(
    "window-counter", inputs={QUERIES: query_key},
    window=windows.Tumbling(size_ms=1000), aggregate=windows.Count(), output=OUT,
)
"""


QUERIES = ["Cats", "cats ", "dogs", "Kafka streams", "spark", "rare query"]


def windows_job(tmp_path, unique) -> tuple:
    """A windowed count of queries per second under names of its own: (pipeline, queries
    stream, output, module)."""
    name = unique("zg")
    constants = {"NAME": name, "QUERIES": f"{name}-queries", "OUT": f"{name}-window-counts"}
    module = write_job(tmp_path, name.replace("-", "_"), job_source(WINDOWS_JOB, **constants))
    pipeline = import_job(tmp_path, module).pipeline
    return pipeline, constants["QUERIES"], constants["OUT"], module


def inject(pipeline, kafka, stream, harness, records, final) -> None:
    """Send `records` through the injector and the Harness; the injector promises a watermark
    every 100 records and `final` at the end (the Harness only `final`)."""
    with Injector(pipeline, "gen", bootstrap=kafka) as injector:
        for i, (query, ts) in enumerate(records):
            injector.send(stream, {"query": query}, key=None, timestamp=ts)
            harness.send(stream, None, {"query": query}, ts)
            if i % 100 == 99:
                injector.advance(min(ts - 500, final))
        injector.advance(final)
    harness.advance_watermark(final)


def queries(rng, n: int, ts: int) -> list[tuple[str, int]]:
    records = []
    for _ in range(n):
        ts += rng.randint(0, 40)
        records.append((rng.choice(QUERIES), ts))
    return records


def window_counts(msgs) -> collections.Counter:
    decode = decoder_for(None)
    return collections.Counter(
        (m.key().decode(), repr(sorted(decode(m.value()).items())), m.timestamp()[1]) for m in msgs
    )


def harness_counts(records) -> collections.Counter:
    return collections.Counter((r.key, repr(sorted(r.value.items())), r.timestamp) for r in records)


def test_window_counter_equals_the_harness(kafka, tmp_path, spark, unique):
    """A windowed count (watermarks from an injector): the backfill's outputs, final state
    and pending windows equal the Harness's on the same input."""
    pipeline, stream, out, _ = windows_job(tmp_path, unique)
    records = queries(random.Random(7), 600, T0)
    final = records[-1][1] - 3_000  # the last windows stay open: their timers pending
    harness = Harness(pipeline, "window-counter")
    inject(pipeline, kafka, stream, harness, records, final)

    summary = backfill(pipeline, "window-counter", bootstrap=kafka, spark=spark)

    expected = harness.outputs(out)
    assert summary.records_in == len(records) and summary.records_out == len(expected)
    msgs = read_topic(kafka, out, expect=len(expected), timeout=60)
    assert window_counts(msgs) == harness_counts(expected)
    state = state_of(kafka, f"{pipeline.name}.window-counter.changelog")
    keys = {" ".join(q.lower().split()) for q in QUERIES}
    assert state == {k: harness.state(k) for k in keys if harness.state(k)}
    journal = read_topic(kafka, f"{pipeline.name}.window-counter.timers", to_end=True)
    pending = {m.key(): m.value() for m in journal}
    assert sum(v is not None for v in pending.values()) == len(harness.timers()) > len(keys)


def test_window_counter_backfill_then_run_equals_the_harness(kafka, tmp_path, spark, unique):
    """Backfill a windowed count, inject more, `logwheel run` it: the streaming side takes
    over the open windows (state, timers and watermark), and the two together emit exactly
    the Harness's windows over the whole input (none twice, none missing), including the
    windows the backfill opened and `run` closed."""
    pipeline, stream, out, module = windows_job(tmp_path, unique)
    rng = random.Random(11)
    history = queries(rng, 400, T0)
    harness = Harness(pipeline, "window-counter")
    inject(pipeline, kafka, stream, harness, history, history[-1][1] - 2_000)
    backfill(pipeline, "window-counter", bootstrap=kafka, spark=spark)
    rest = queries(rng, 400, history[-1][1])
    spanning = history[-1][1] // 1000
    assert rest[0][1] // 1000 == spanning  # a window the backfill opens and `run` closes
    inject(pipeline, kafka, stream, harness, rest, rest[-1][1] - 2_000)
    expected = harness_counts(harness.outputs(out))

    job = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "state", path=tmp_path)
    job.start()
    try:
        # to the end past the expected count: anything twice committed with them too
        msgs = read_topic(kafka, out, expect=sum(expected.values()), timeout=120, to_end=True)
    finally:
        job.stop()
    assert window_counts(msgs) == expected


def test_global_table_lookups_as_of_record_time_equal_the_harness(kafka, tmp_path, spark):
    """A global table with history (issue 39): rates change, one is deleted, while orders of
    every time come; the backfill answers each order with the rate of its time, as the
    Harness does (tests/integration/test_global_tables.py: as `run` does)."""
    from tests.conftest import create_topics
    from tests.global_rates import harness_rates

    job = UniqueJob(kafka, tmp_path, "tests.global_rates:build", "gtasof")
    create_topics(kafka, [f"{job.prefix}rates"], partitions=3)
    rng, currencies = random.Random(5), ["EUR", "USD", "GBP", "CHF"]
    table = [(c, {"rate": rng.randrange(50, 200) / 100}, T0 + t)
             for t in range(0, 5_000, 1_000) for c in currencies]  # fmt: skip
    table.append(("GBP", None, T0 + 2_500))
    orders = [(c, {"id": i, "currency": c}, T0 + rng.randrange(0, 6_000))
              for i, c in enumerate(rng.choices(currencies, k=40))]  # fmt: skip
    expected = harness_rates(job.pipeline, job.prefix, table, orders)
    assert None in {rate for _, rate in expected}  # GBP between its deletion and next rate
    produce(kafka, f"{job.prefix}rates", table)
    produce(kafka, f"{job.prefix}orders", orders)

    summary = backfill(job.pipeline, "convert", bootstrap=kafka, spark=spark)

    assert summary.records_in == len(orders) and summary.dead_letters == 0
    msgs = read_topic(kafka, f"{job.prefix}converted", expect=len(orders), to_end=True)
    assert sorted((v["id"], v["rate"]) for v in json_values(msgs)) == expected


def test_a_join_backfill_then_run_handing_over_inside_open_windows_equals_the_harness(
    kafka, tmp_path, spark, unique
):
    """Backfill an outer join over history whose last windows are open, inject more, `logwheel
    run` it: `run` takes over the open records (matched flags, timers, watermark), and the two
    together emit exactly the Harness's results, none twice, none missing — among them a pair
    of an order the backfill held and a payment `run` read, and no unmatched row for an order
    the backfill matched."""
    pipeline, names, module = joins.joins_job(tmp_path, unique("jn"))
    harness, rng = Harness(pipeline, "outer"), random.Random(7)
    streams = {"orders": names["ORDERS"], "payments": names["PAYMENTS"]}
    edge = joins.T0 + 4 * joins.PERIOD - 200  # the watermark at the hand-over
    o98 = [("orders", {"order": "o98"}, edge - 60), ("payments", {"order": "o98"}, edge - 50)]
    o99 = [("orders", {"order": "o99"}, edge), ("payments", {"order": "o99", "m": 1}, edge + 1000)]
    crafted = {3: o98 + o99[:1], 4: o99[1:]}  # o99's payment on its window's far edge

    def inject(blocks: range, final: int) -> None:
        with Injector(pipeline, "gen", bootstrap=kafka) as injector:
            for i in blocks:
                for side, value, ts in joins.block(rng, i, 15) + crafted.get(i, []):
                    injector.send(streams[side], value, key=None, timestamp=ts)
                    harness.send(streams[side], None, value, ts)
                injector.advance(min(joins.T0 + (i + 1) * joins.PERIOD - 200, final))
            injector.advance(final)
        harness.advance_watermark(final)

    inject(range(4), edge)
    assert harness.state("o98") and harness.state("o99")  # open at the hand-over
    backfill(pipeline, "outer", bootstrap=kafka, spark=spark)
    inject(range(4, 6), joins.T0 + 40 * joins.PERIOD)
    produced = harness.outputs(f"{names['NAME']}-outer")
    pairs = {r.key: r.value for r in produced if r.key in ("o98", "o99")}
    assert len([r for r in produced if r.key in ("o98", "o99")]) == len(pairs) == 2  # none alone
    assert pairs["o99"] == {"key": "o99", "left": o99[0][1], "right": o99[1][1]}
    want = harness_results(produced)
    job = Job(f"{module}:pipeline", bootstrap=kafka, state_dir=tmp_path / "state", path=tmp_path)
    job.args += ["--computation", "outer"]
    job.start()
    try:
        # to the end past the expected count: anything twice committed with them too
        out = f"{names['NAME']}-outer"
        got = read_topic(kafka, out, expect=sum(want.values()), timeout=120, to_end=True)
    finally:
        assert job.stop() == 0
    assert kafka_results(got) == want


# -- hand-over and bad input ------------------------------------------------------------------


def test_backfill_then_run_counts_every_word_exactly_once(kafka, tmp_path, spark):
    """Backfill both stages over the history (garbage among it), keep producing, then
    `logwheel run` the rest: per word the counts are exactly 1..n; the garbage is in the
    dead-letter topic with its reason and where it came from. While `run` runs, a backfill
    is refused."""
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(200)
    produce(kafka, wc.lines_topic, [("bad-1", "not a line object", None)])
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(wc.lines_topic, b"\x00\xffnot json", b"bad-2")
    producer.flush(30)
    wc.send_lines(100)

    split = backfill(wc.pipeline, "split-words", bootstrap=kafka, spark=spark)
    count = backfill(wc.pipeline, "count-words", bootstrap=kafka, spark=spark)

    assert split.records_in == 302 and split.dead_letters == 2
    assert count.records_in == wc.total() and count.dead_letters == 0
    dead = read_topic(kafka, f"{wc.name}.split-words.dlq", expect=2, timeout=60)
    headers = {m.key(): dict(m.headers()) for m in dead}
    assert headers[b"bad-1"]["logwheel.error.stage"] == b"process_record"
    assert headers[b"bad-2"]["logwheel.error.stage"] == b"decode"
    assert headers[b"bad-2"]["logwheel.source.topic"] == wc.lines_topic.encode()
    assert dead[[m.key() for m in dead].index(b"bad-2")].value() == b"\x00\xffnot json"

    wc.send_lines(150)
    job = wc.job().start()
    try:
        wc.check_exact(wc.read_counts())
        with pytest.raises(PipelineError, match="live member.*then backfill"):
            backfill(wc.pipeline, "count-words", bootstrap=kafka, spark=spark)
    finally:
        job.stop()


# -- exactly once across retries --------------------------------------------------------------


def faulty(kafka: str, tmp_path, task: int, after: int, stall: bool = False) -> Wordcount:
    """Wordcount whose count-words fails on purpose in a backfill while `tmp_path/armed`
    exists (tests/backfill_faults.py)."""
    armed = tmp_path / "armed"
    armed.touch()
    return Wordcount(kafka, tmp_path, factory="tests.backfill_faults:faulty_wordcount",
                     extra=(task, after, stall, str(armed)))  # fmt: skip


def backfill_command(wc: Wordcount, kafka: str, tmp_path, master: str) -> tuple[list, dict]:
    """`logwheel backfill` of `wc` as a process of its own (its Spark workers import the job
    and tests/backfill_faults.py from PYTHONPATH), and its environment."""
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    args = [sys.executable, "-m", "framework.cli", "backfill", f"{wc.unique.module}:pipeline",
            "--bootstrap", kafka, "--master", master, "--tasks", "2"]  # fmt: skip
    return args, env


def test_a_failed_spark_task_is_retried_and_its_output_seen_once(kafka, tmp_path, spark):
    """Task 0's first attempt fails after part of its output is on the broker (uncommitted);
    Spark retries it: read_committed sees every count once, read_uncommitted the debris. The
    fault is count-words'; split-words runs in the module's session, count-words in a
    `logwheel backfill` of its own."""
    wc = faulty(kafka, tmp_path, task=0, after=20)
    wc.send_lines(300)
    backfill(wc.pipeline, "split-words", bootstrap=kafka, spark=spark, tasks=2)
    args, env = backfill_command(wc, kafka, tmp_path, "local[2,3]")  # up to 3 attempts a task
    done = subprocess.run([*args, "--computation", "count-words"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    counts = wc.read_counts()
    wc.check_exact(counts)
    everything = read_topic(kafka, wc.counts_topic, committed=False, to_end=True)
    assert len(everything) >= wc.total() + 20, "the failed attempt wrote nothing: no fault"


def test_a_killed_backfill_run_again_finishes_its_plan_once(kafka, tmp_path, spark):
    """`logwheel backfill` of count-words is SIGKILLed (with its Spark) while one task has
    committed and the other is stalled mid-transaction; run again, it finishes the same plan,
    skipping the committed task: every count once, and the group's offsets at the end.
    (split-words, before it, runs in the module's session.)"""
    wc = faulty(kafka, tmp_path, task=1, after=10, stall=True)
    wc.send_lines(300)
    backfill(wc.pipeline, "split-words", bootstrap=kafka, spark=spark, tasks=2)
    args, env = backfill_command(wc, kafka, tmp_path, "local[2]")
    count_args = [*args, "--computation", "count-words"]
    log = open(tmp_path / "killed.log", "wb")  # noqa: SIM115
    first = subprocess.Popen(count_args, env=env, cwd=REPO,
                             stdout=log, stderr=log, start_new_session=True)  # fmt: skip
    spec = wc.pipeline["count-words"]
    topic = backfill_topic(spec)

    def task0_committed():
        try:
            records = read_backfill_topic(kafka, topic)
        except KafkaException:  # not created yet
            return False
        plan = records.get(PLAN_KEY)
        return plan and done_key(Plan.from_json(plan).id, 0) in records

    try:
        wait_for(task0_committed, 300, interval=1, what="task 0 of the plan to commit")

        def task1_stalled_mid_transaction() -> bool:
            uncommitted = read_topic(kafka, wc.counts_topic, committed=False, to_end=True)
            return len(uncommitted) > len(read_topic(kafka, wc.counts_topic, to_end=True))

        wait_for(task1_stalled_mid_transaction, 120, interval=1, what="task 1's open writes")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        log.close()
    (tmp_path / "armed").unlink()  # the run again meets no fault
    rerun = subprocess.run(count_args, env=env, cwd=REPO, capture_output=True, text=True,
                           timeout=600)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{wc.total()} records in" not in rerun.stdout  # task 0 was skipped, not redone
    wc.check_exact(wc.read_counts())
    plan = Plan.from_json(read_backfill_topic(kafka, topic)[PLAN_KEY])
    assert plan.status == "done"


def test_an_unfinished_plan_naming_another_topic_is_refused_before_anything_runs(kafka, tmp_path):
    """Whoever may write the `.backfill` topic stores a running plan for split-words that reads
    the counts topic in a million tasks: the backfill refuses it in one line naming the topic,
    before Spark starts, and has read, written and committed nothing. (A plan of its own is
    finished: the killed backfill above.)"""
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(20)
    spec = wc.pipeline["split-words"]
    elsewhere = Range(wc.counts_topic, 0, 0, 1, wc.lines_topic, False)
    forged = Plan(computation=spec.name, ranges=(elsewhere,), tasks=1_000_000, changelog_end={},
                  timers_end={}, start_watermarks={}, end_watermark=None, lag=0)  # fmt: skip
    ensure_topics(AdminClient({"bootstrap.servers": kafka}), [backfill_topic_spec(spec)])
    write_plan(kafka, spec, forged, None)

    with pytest.raises(PlanError, match=f"reads topic '{wc.counts_topic}', which is none of"):
        backfill(wc.pipeline, "split-words", bootstrap=kafka, master="local[1]")

    assert Plan.from_json(read_backfill_topic(kafka, backfill_topic(spec))[PLAN_KEY]) == forged
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": spec.group})
    try:
        committed = consumer.committed([TopicPartition(wc.lines_topic, 0)], timeout=30)
    finally:
        consumer.close()
    assert committed[0].offset < 0
    assert read_topic(kafka, f"{wc.prefix}words", idle=1) == []


# -- secrets --------------------------------------------------------------------------------


def test_a_secret_in_spark_settings_is_on_no_command_line(kafka, tmp_path):
    """`logwheel backfill --config` with a keystore password in `[spark]`: while it runs,
    no process's command line (what `ps` shows every local user) holds the password, though
    Spark's JVM did start and the backfill did its work."""
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(50)
    secret = f"s3cret-{os.getpid()}-{random.randrange(10**9)}"
    config = tmp_path / "backfill.toml"
    config.write_text('[spark]\n"spark.ssl.keyStorePassword" = "${SPARK_STORE_PASSWORD}"\n')
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}",
           "SPARK_STORE_PASSWORD": secret}  # fmt: skip
    args = [sys.executable, "-m", "framework.cli", "backfill", f"{wc.unique.module}:pipeline",
            "--computation", "split-words", "--bootstrap", kafka, "--master", "local[1]",
            "--config", str(config)]  # fmt: skip
    seen: list[str] = []
    with subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT) as backfilling:  # fmt: skip
        while backfilling.poll() is None:
            seen += subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True,
                                   text=True).stdout.splitlines()  # fmt: skip
            time.sleep(0.2)
        output = backfilling.stdout.read().decode(errors="replace")
    assert backfilling.returncode == 0, output[-3000:]
    assert any("org.apache.spark.deploy.SparkSubmit" in line for line in seen), "no Spark seen"
    assert not [line for line in seen if secret in line]
    assert secret not in output


def test_the_local_driver_listens_on_loopback_and_refuses_a_client_without_its_secret(spark):
    """A local master's driver (RPC and block manager, which serve the tasks and with them
    the Kafka and registry secrets) listens on 127.0.0.1 alone, and its RPC takes only
    clients that hold the application's secret, which Spark made for this session. (A wrong
    secret cannot be tried from this JVM: Spark keeps a local application's secret in the
    JVM's Hadoop credentials, which every client made in it uses; the standalone cluster's
    test tries one.)"""
    context = spark.sparkContext
    rpc = int(context.getConf().get("spark.driver.port"))
    blocks = context._jsc.sc().env().blockManager().blockManagerId().port()
    for port in (rpc, blocks):
        assert listening_addresses(port) == {ipaddress.ip_address("127.0.0.1")}, port
    secret = context._jsc.sc().env().securityManager().getSecretKey()
    jvm = context._jvm
    assert not rpc_connects(jvm, rpc, "MapOutputTracker", {})
    right = {"spark.authenticate": "true", "spark.authenticate.secret": secret}
    assert rpc_connects(jvm, rpc, "MapOutputTracker", right)


def test_the_first_backfill_writes_the_drivers_class_archive_whole_and_prints_nothing_of_it(
    kafka, tmp_path
):
    """The CLI's own session writes the archive as its JVM exits, then puts it in place (one
    that does not map whole never is: tests/unit/jvm/test_class_archive.py); the JVM's CDS
    messages stay off the command's output, whose last line is still the summary."""
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(20)
    args, env = backfill_command(wc, kafka, tmp_path, "local[1]")
    home = tmp_path / "home"
    env = {**env, "LOGWHEEL_SPARK_CLASS_ARCHIVE": "1", "LOGWHEEL_HOME": str(home)}
    done = subprocess.run([*args, "--computation", "split-words"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("backfill "), done.stdout[-2000:]
    assert "cds" not in done.stdout
    archives = list((home / "cds").glob("spark-driver-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 10_000_000
    assert not list((home / "cds").glob("*.part"))
