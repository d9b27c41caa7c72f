"""`logwheel reset`: reprocess history from the start with the state wiped."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from changelog import ChangelogTable
from framework.core.pipeline import PipelineError
from framework.kafka.topics import create_topics
from framework.ops.reset import reset
from tests.support import (
    Wordcount,
    import_job,
    job_source,
    produce,
    read_marks,
    read_topic,
    start_job,
    unique_name,
    wait_for,
    wait_until_resettable,
    write_job,
)


def test_reset_to_earliest_with_wiped_state_counts_again_from_zero(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(300)
    job = wc.job(computations=["count-words", "split-words"]).start()
    try:
        wc.read_counts()
        with pytest.raises(PipelineError, match="live member"):
            reset(wc.pipeline, "count-words", "earliest", bootstrap=kafka, state_dir=tmp_path)
    finally:
        job.stop()
    state = tmp_path / "state-a"
    wait_until_resettable(wc.pipeline, "count-words", kafka, state)
    plan = reset(
        wc.pipeline, "count-words", "earliest", bootstrap=kafka, state_dir=state, wipe_state=True
    )
    assert any("changelog" in line for line in plan)
    assert not (state / wc.name / "count-words").exists()

    job = wc.job(computations=["count-words", "split-words"]).start()
    try:
        # every count emitted a second time, and whatever was committed with them
        msgs = read_topic(kafka, wc.counts_topic, expect=2 * wc.total(), timeout=120, to_end=True)
        with ChangelogTable(f"{wc.name}.count-words.changelog", bootstrap=kafka) as table:
            assert dict(table.catch_up().items()) == {w: {"count": n} for w, n in wc.words.items()}
    finally:
        job.stop()
    assert len(msgs) == 2 * wc.total()
    assert Counter(m.key().decode() for m in msgs) == Counter(
        {w: 2 * n for w, n in wc.words.items()}
    )


LATENESS_JOB = """
from framework import BoundedOutOfOrderness, Computation, Pipeline


class Tag(Computation):
    def process_record(self, ctx, record):
        ctx.produce(NAME + "-tags", {"ts": record.timestamp, "late": False})

    def on_late_record(self, ctx, record):
        ctx.produce(NAME + "-tags", {"ts": record.timestamp, "late": True})


pipeline = Pipeline(NAME, partitions=1)
pipeline.source(NAME + "-in", watermark=BoundedOutOfOrderness(ms=0, idle_ms=600_000))
pipeline.computation("tag", Tag, inputs={NAME + "-in": None}, outputs={NAME + "-tags": None})
"""


def test_reset_without_wipe_replays_in_event_time_from_scratch(kafka, tmp_path):
    """Reprocessing without --wipe-state keeps state and timers but not event time: the
    replayed records are not late (they were, when tasks resumed their old watermark)."""
    name = unique_name("replay")
    module = write_job(tmp_path, name.replace("-", "_"), job_source(LATENESS_JOB, NAME=name))
    pipeline = import_job(tmp_path, module).pipeline
    create_topics(kafka, pipeline)
    base = 1_700_000_000_000
    produce(kafka, f"{name}-in", [("k", {"i": i}, base + i * 1000) for i in range(20)])
    state = tmp_path / "state"
    job = start_job(tmp_path, module, kafka)
    try:
        first = read_topic(kafka, f"{name}-tags", expect=20, timeout=90)
        assert not any(json.loads(m.value())["late"] for m in first)
        wait_for(
            lambda: any(m.input_watermark >= base + 19_000 for m in read_marks(
                kafka, f"{name}.tag.watermarks", timeout=5, idle=1)),
            60,
            what="a mark with the input watermark past every record",
        )  # fmt: skip
    finally:
        job.stop()
    wait_until_resettable(pipeline, "tag", kafka, state)
    reset(pipeline, "tag", "earliest", bootstrap=kafka, state_dir=state)
    job = start_job(tmp_path, module, kafka)
    try:
        msgs = read_topic(kafka, f"{name}-tags", expect=40, timeout=90)
    finally:
        job.stop()
    replayed = [json.loads(m.value()) for m in msgs][20:]
    assert len(replayed) == 20
    assert [v["late"] for v in replayed] == [False] * 20, replayed
