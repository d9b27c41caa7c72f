"""Global tables on a real broker (issue 39): a table partitioned unlike the computation's
input, read whole by every task; a table record written while the job runs is met by the
records after it; a restart with a current replica reads only what was written meanwhile
(counted in its log line); every lookup as of its record's time is the Harness's answer.
(The backfill's: tests/integration/test_backfill.py.)"""

from __future__ import annotations

import re

import pytest

from tests.conftest import create_topics
from tests.global_rates import harness_rates
from tests.support import UniqueJob, json_values, produce, read_topic

pytestmark = pytest.mark.timeout(600)

T0 = 1_700_000_000_000
CURRENCIES = ["EUR", "USD", "GBP", "CHF", "JPY"]


def _job(kafka: str, tmp_path, prefix: str) -> tuple[UniqueJob, str, str, str]:
    job = UniqueJob(kafka, tmp_path, "tests.global_rates:build", prefix)
    rates, orders, out = (f"{job.prefix}{s}" for s in ("rates", "orders", "converted"))
    create_topics(kafka, [rates], partitions=3)  # the input has 2: not co-partitioned
    return job, rates, orders, out


def _read(kafka: str, out: str, expect: int) -> list[tuple[int, float | None]]:
    msgs = read_topic(kafka, out, expect=expect, timeout=90, to_end=True)
    return sorted((v["id"], v["rate"]) for v in json_values(msgs))


def _read_at_start(log: str) -> int:
    """How many records the job's replica of `rates` read to its end when it started (over
    every membership of the process, should one have had to join again)."""
    found = re.findall(r"global table 'rates' \(\S+\) read to its end: (\d+) records", log)
    assert found, "no global table read logged"
    return sum(map(int, found))


def test_a_table_is_read_whole_followed_and_resumed_from_its_local_replica(kafka, tmp_path):
    """Every answer is the Harness's on the same table records and orders, as of each order's
    time; the restart's replica reads only the two table records written while it was down."""
    job_def, rates, orders, out = _job(kafka, tmp_path, "gtrun")
    table = [(c, {"rate": float(i)}, T0) for i, c in enumerate(CURRENCIES)]
    produce(kafka, rates, table)
    sent = [(c, {"id": i, "currency": c}, T0 + 10) for i, c in enumerate(CURRENCIES)]
    job = job_def.job().start().wait_working()
    try:
        produce(kafka, orders, sent)
        assert _read(kafka, out, 5) == harness_rates(job_def.pipeline, job_def.prefix, table, sent)
        assert _read_at_start(job.output()) == 5  # every partition of the table
        # written after the job started, then orders after it: they meet it, as of their time
        table.append(("EUR", {"rate": 9.5}, T0 + 1_000))
        produce(kafka, rates, table[-1:])
        sent += [("EUR", {"id": 5, "currency": "EUR"}, T0 + 1_001),
                 ("EUR", {"id": 6, "currency": "EUR"}, T0 + 999)]  # fmt: skip
        produce(kafka, orders, sent[-2:])
        assert _read(kafka, out, 7) == harness_rates(job_def.pipeline, job_def.prefix, table, sent)
    finally:
        assert job.stop() == 0
    table += [("USD", {"rate": 7.0}, T0 + 2_000), ("CHF", None, T0 + 2_000)]
    produce(kafka, rates, table[-2:])
    job.start().wait_working()
    try:
        sent += [(c, {"id": 7 + i, "currency": c}, T0 + 2_001) for i, c in
                 enumerate(["USD", "CHF", "EUR"])]  # fmt: skip
        produce(kafka, orders, sent[-3:])
        expected = harness_rates(job_def.pipeline, job_def.prefix, table, sent)
        assert _read(kafka, out, 10) == expected
        assert expected[-3:] == [(7, 7.0), (8, None), (9, 9.5)]
        # the replica was current but for the two records written while it was down
        assert _read_at_start(job.output(this_start=True)) == 2
    finally:
        assert job.stop() == 0
