"""A brand-new broker serves its first consumer group at once: `Broker.start` (and so
`logwheel broker start`) returns only once the group and transaction coordinators are loaded
(broker/readiness.py). Before, a plain consumer of a new group that assigned partitions right
after the start met NOT_COORDINATOR on its first OffsetFetch, which librdkafka did not retry
(confluentinc/librdkafka#5586), and read nothing.

A race shows itself by chance: `make test` starts three fresh brokers in a row here (a fresh
broker elsewhere in it, test_jars' and the seeded runs', meets a first group too), `make chaos`
(LOGWHEEL_CHAOS_FULL=1) ten."""

from __future__ import annotations

import os

from framework.broker.embedded import Broker
from tests.support_broker import first_group_reads

STARTS = 10 if os.environ.get("LOGWHEEL_CHAOS_FULL") == "1" else 3


def test_a_fresh_broker_serves_its_first_group_at_once_starts_in_a_row(tmp_path, monkeypatch):
    # the JIT's first tier only: a broker that lives seconds starts on half the CPU
    monkeypatch.setenv("LOGWHEEL_BROKER_JVM_OPTS", "-XX:TieredStopAtLevel=1")
    for start in range(STARTS):
        broker = Broker(tmp_path / f"broker-{start}")
        started = broker.start(port=0, say=lambda _: None)
        try:
            assert first_group_reads(started.address) == 10, (
                f"start {start + 1}: the first group missed records"
            )
        finally:
            broker.stop()
