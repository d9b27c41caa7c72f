"""bench/join_cpu.py measures a join that gives the reference's results: its executor over
bench/join.py's input (less the warm-up pairs) writes as many results as the reference has,
whichever way the watermark moves and however often it commits."""

from __future__ import annotations

import pytest

from bench import join, join_cpu


@pytest.mark.parametrize("how", join.HOWS)
@pytest.mark.parametrize(("commit_every", "watermark_every"), [(7, 3), (1_000, 5_000)])
def test_the_measured_join_writes_the_references_results(how, commit_every, watermark_every):
    data = join.make_input(600, 20, 1, base=1_700_000_000_000)
    _, produced = join_cpu.run(how, join_cpu.records(data), commit_every, watermark_every)
    warmup_pairs = join.PARTITIONS
    assert produced == sum(data.expected(how).values()) - warmup_pairs
