"""The Prometheus endpoint of `logwheel run --metrics-port`: every metric, plausible values."""

from __future__ import annotations

import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import Wordcount, wait_for

pytestmark = pytest.mark.timeout(300)


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Every sample the endpoint serves: (name, labels) -> value."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples, name: str, **labels) -> float:
    return sum(
        v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()
    )


def test_metrics_after_a_run(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(500)
    job = wc.job()
    job.args += ["--metrics-port", "0"]
    job.start()
    try:
        wc.read_counts()
        ports = wait_for(
            lambda: (
                (p := re.findall(r"metrics on http://127\.0\.0\.1:(\d+)/", job.output()))
                and len(p) == 2
                and p
            ),
            60,
            what="both computations to serve metrics",
        )
        by_computation = {}
        for port in map(int, ports):
            samples = scrape(port)
            names = {dict(ls).get("computation") for (_, ls) in samples} - {None}
            by_computation[names.pop()] = (port, samples)

        def settled():  # counts move into the metrics once a second, the outputs' once
            # their delivery is reported: a scrape had every record in and 1,000 of 1,494 out
            samples = scrape(by_computation["count-words"][0])
            total = wc.total()
            return (
                value(samples, "logwheel_records_in_total") == total
                and value(samples, "logwheel_records_out_total", topic=wc.counts_topic) == total
                and samples
            )

        count = wait_for(settled, 30, what="records in and out to reach what was produced")
        split = scrape(by_computation["split-words"][0])
    finally:
        job.stop()
    assert value(split, "logwheel_records_in_total", stream=wc.lines_topic) == 500
    assert value(count, "logwheel_records_out_total", topic=wc.counts_topic) == wc.total()
    assert value(count, "logwheel_commits_total") > 0
    assert value(count, "logwheel_commit_seconds_count") == value(count, "logwheel_commits_total")
    assert value(count, "logwheel_rebalances_total", kind="assigned") >= 1
    assert value(count, "logwheel_consumer_lag") == 0
    assert value(count, "logwheel_dead_letters_total") == 0
    for name in ("transaction_aborts", "late_records", "restore_records", "restore_seconds"):
        assert f"logwheel_{name}_total" in {n for n, _ in count}, name
