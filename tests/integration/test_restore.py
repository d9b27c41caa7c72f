"""Restoring a task's store: a local store the journals contradict is wiped and restored,
never trusted (Kafka Streams' TaskCorruptedException)."""

from __future__ import annotations

from collections import Counter

import pytest

from framework.ops.reset import reset
from framework.serde.catalogue import decoder_for
from tests.support import Wordcount, read_topic, wait_until_resettable

pytestmark = pytest.mark.timeout(600)


def test_a_store_older_than_its_wiped_changelog_is_not_trusted(kafka, tmp_path):
    """`reset --wipe-state` run against another state dir leaves this instance's store
    behind; when this instance starts again, its checkpoint names a changelog that no longer
    exists, so it must restore from the new (empty) one and count from zero again."""
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(300)
    job = wc.job("a").start()
    try:
        wc.read_counts()
    finally:
        job.stop()
    elsewhere = tmp_path / "state-b"

    wait_until_resettable(wc.pipeline, "count-words", kafka, elsewhere)
    reset(
        wc.pipeline, "count-words", "earliest", bootstrap=kafka, state_dir=elsewhere,
        wipe_state=True,
    )  # fmt: skip
    job = wc.job("a").start()
    try:
        # every count emitted a second time, and whatever was committed with them
        msgs = read_topic(kafka, wc.counts_topic, expect=2 * wc.total(), timeout=120, to_end=True)
        log = job.output()
    finally:
        job.stop()
    decode = decoder_for("wordcount.WordCount")
    pairs = Counter((v["word"], v["count"]) for v in (decode(m.value()) for m in msgs))
    expected = {(w, c): 2 for w, n in wc.words.items() for c in range(1, n + 1)}
    assert pairs == expected, "the old local state came back"
    assert "wiping the local store" in log
