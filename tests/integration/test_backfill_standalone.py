"""A backfill on a Spark standalone cluster of two one-core workers (Spark's own master and
workers, loopback only, stopped at the end even on failure): exact, as on `local[*]`; and the
cluster takes only clients that hold its secret. One cluster and one session for the module."""

from __future__ import annotations

import collections
import json
import random
import urllib.request
from pathlib import Path

import pytest

from framework.backfill.driver import backfill
from framework.backfill.session import session
from framework.backfill.standalone import client_conf, standalone
from framework.serde.catalogue import decoder_for
from tests.support import Wordcount, produce, read_topic, wait_for
from tests.support_spark import rpc_connects

pytestmark = pytest.mark.timeout(300)

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster():
    with standalone(workers=2, cores=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def spark(cluster):
    spark = session(cluster.url, "logwheel-test-standalone", client_conf(cluster))
    try:
        # the driver and an executor on each worker
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
        wait_for(lambda: status().size() == 3, 120, what="two executors")
        yield spark
    finally:
        spark.stop()


def test_a_backfill_on_two_standalone_workers_counts_each_word_exactly(kafka, tmp_path, spark):
    wc = Wordcount(kafka, tmp_path)
    rng = random.Random(4)
    words = [rng.choice(Wordcount.VOCABULARY[:40]) for _ in range(800)]
    produce(kafka, f"{wc.prefix}words", [(w, {"word": w}, T0 + i) for i, w in enumerate(words)])

    summary = backfill(wc.pipeline, "count-words", bootstrap=kafka, spark=spark)

    assert summary.records_in == summary.records_out == len(words)
    decode = decoder_for("wordcount.WordCount")
    counts = collections.defaultdict(list)
    for m in read_topic(kafka, wc.counts_topic, expect=len(words), timeout=60):
        value = decode(m.value())
        counts[value["word"]].append(value["count"])
    assert {w: sorted(c) for w, c in counts.items()} == {
        w: list(range(1, n + 1)) for w, n in collections.Counter(words).items()
    }


def test_the_cluster_refuses_a_client_without_its_secret_and_no_command_line_shows_it(
    cluster, spark
):
    """Another local user's client of Spark's RPC, without the cluster's secret or with
    another, is refused by the master (which would take its application) and by each worker
    (which would launch its executors as this user); with the secret it connects. While the
    daemons, the driver and the executors run, no command line, which every local user can
    read, holds the secret."""
    jvm = spark.sparkContext._jvm
    with urllib.request.urlopen(f"{cluster.ui}/json/", timeout=30) as answer:
        workers = [w["port"] for w in json.load(answer)["workers"]]
    assert len(workers) == 2
    daemons = [(int(cluster.url.rsplit(":", 1)[1]), "Master")] + [(p, "Worker") for p in workers]
    wrong = {"spark.authenticate": "true", "spark.authenticate.secret": "0" * 64,
             "spark.network.crypto.enabled": "true"}  # fmt: skip
    right = {**wrong, "spark.authenticate.secret": cluster.secret}
    for port, endpoint in daemons:
        assert not rpc_connects(jvm, port, endpoint, {}), endpoint
        assert not rpc_connects(jvm, port, endpoint, wrong), endpoint
        assert rpc_connects(jvm, port, endpoint, right), endpoint

    command_lines = {}
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command_lines[path.parent.name] = path.read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile
            continue
    executors = [c for c in command_lines.values() if "CoarseGrainedExecutorBackend" in c]
    assert len(executors) == 2 and any("deploy.master.Master" in c for c in command_lines.values())
    assert not [pid for pid, line in command_lines.items() if cluster.secret in line]
