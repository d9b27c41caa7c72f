"""A backfill on a Spark standalone cluster of two one-core workers (Spark's own master and
workers, loopback only, stopped at the end even on failure): exact, as on `local[*]`."""

from __future__ import annotations

import collections
import random

import pytest

from framework.backfill.driver import backfill
from framework.backfill.session import session
from framework.backfill.standalone import client_conf, standalone
from framework.serde.codecs import decoder_for
from tests.support import Wordcount, produce, read_topic, wait_for

pytestmark = pytest.mark.timeout(300)

T0 = 1_700_000_000_000


def test_a_backfill_on_two_standalone_workers_counts_each_word_exactly(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    rng = random.Random(4)
    words = [rng.choice(Wordcount.VOCABULARY[:40]) for _ in range(800)]
    produce(kafka, f"{wc.prefix}words", [(w, {"word": w}, T0 + i) for i, w in enumerate(words)])

    with standalone(workers=2, cores=1) as cluster:
        spark = session(cluster.url, "logwheel-test-standalone", client_conf())
        try:
            # the driver and an executor on each worker
            status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
            wait_for(lambda: status().size() == 3, 120, what="two executors")
            summary = backfill(wc.pipeline, "count-words", bootstrap=kafka, spark=spark)
        finally:
            spark.stop()

    assert summary.records_in == summary.records_out == len(words)
    decode = decoder_for("wordcount.WordCount")
    counts = collections.defaultdict(list)
    for m in read_topic(kafka, wc.counts_topic, expect=len(words), timeout=60):
        value = decode(m.value())
        counts[value["word"]].append(value["count"])
    assert {w: sorted(c) for w, c in counts.items()} == {
        w: list(range(1, n + 1)) for w, n in collections.Counter(words).items()
    }
