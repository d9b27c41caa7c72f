"""framework.core.metrics: names follow Prometheus conventions, labels are bounded (never a key),
every metric the table of docs/metrics.md names exists, and `serve(0)` picks a free port that
answers."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

import framework.core.metrics as metrics

METRICS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"
BOUNDED = {"computation", "stream", "topic", "partition", "stage", "reason", "kind", "call"}
# "call": the name of a client call or runtime function, bounded by the code
BOUNDED |= {"table"}  # a table's name, as the computation declares it


def ours() -> list:
    return [m for m in vars(metrics).values() if isinstance(m, Counter | Gauge | Histogram)]


def test_names_and_labels_follow_the_conventions():
    assert len(ours()) >= 15
    for metric in ours():
        name = metric._name
        assert name.startswith("logwheel_"), name
        assert metric._documentation, f"{name} has no help text"
        assert set(metric._labelnames) <= BOUNDED, f"{name}: unbounded labels"
        if isinstance(metric, Histogram):
            assert name.endswith("_seconds"), name
        if isinstance(metric, Gauge):
            assert not name.endswith("_total"), name


def test_every_metric_in_the_readme_table_exists():
    exposed = {
        sample.name.removesuffix("_created")
        for family in REGISTRY.collect()
        for sample in family.samples
    } | {family.name for family in REGISTRY.collect()}
    table = METRICS.read_text()
    named = set(re.findall(r"`(logwheel_[a-z_]+)`", table))
    assert named, "no metric table in docs/metrics.md"
    missing = {
        name for name in named if name not in exposed and name.removesuffix("_total") not in exposed
    }
    assert not missing, f"named in docs/metrics.md, not defined: {missing}"


def test_serve_on_port_0_picks_a_free_port_that_answers():
    port = metrics.serve(0)
    metrics.RECORDS_IN.labels("unit-test", "s").inc(3)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'logwheel_records_in_total{computation="unit-test",stream="s"} 3.0' in body


def _listening(port: int) -> set[str]:
    """The local IPv4 addresses a socket listens on `port` from (/proc/net/tcp, state 0A)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return found


def test_metrics_listen_on_loopback_by_default():
    from framework.core.metrics import serve

    assert _listening(serve(0)) == {"127.0.0.1"}
