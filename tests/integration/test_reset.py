"""`logwheel reset`: reprocess history from the start with the state wiped."""

from __future__ import annotations

from collections import Counter

import pytest

from changelog import ChangelogTable
from framework.pipeline import PipelineError
from framework.reset import reset
from tests.support import Wordcount, read_topic, wait_for


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
    wait_for(lambda: _resettable(wc, kafka, state), 60, what="the stopped members' sessions to end")
    plan = reset(
        wc.pipeline, "count-words", "earliest", bootstrap=kafka, state_dir=state, wipe_state=True
    )
    assert any("changelog" in line for line in plan)
    assert not (state / wc.name / "count-words").exists()

    job = wc.job(computations=["count-words", "split-words"]).start()
    try:
        msgs = wait_for(
            lambda: (
                (m := read_topic(kafka, wc.counts_topic, idle=2)) and len(m) >= 2 * wc.total() and m
            ),
            120,
            what="every count emitted a second time",
        )
        with ChangelogTable(f"{wc.name}.count-words.changelog", bootstrap=kafka) as table:
            assert dict(table.catch_up().items()) == {w: {"count": n} for w, n in wc.words.items()}
    finally:
        job.stop()
    assert len(msgs) == 2 * wc.total()
    assert Counter(m.key().decode() for m in msgs) == Counter(
        {w: 2 * n for w, n in wc.words.items()}
    )


def _resettable(wc: Wordcount, kafka: str, state) -> bool:
    try:
        reset(wc.pipeline, "count-words", "earliest", bootstrap=kafka, state_dir=state,
              dry_run=True)  # fmt: skip
    except PipelineError:
        return False
    return True
