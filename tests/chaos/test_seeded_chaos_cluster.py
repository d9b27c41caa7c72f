"""The seeded chaos run in cluster mode (issue 24): the same workload and verifier as
`test_seeded_chaos.py`, on a three-node cluster (replication factor 3, min.insync.replicas 2)
that the clients reach only through Toxiproxy, under the process faults and, one at a time,
a node SIGKILLed, a node stopped past the broker session timeout, the active controller
SIGKILLed, a node cut off by its proxy, latency on a node's proxy and connection resets on a
transaction coordinator's proxy (`tests/chaos/seeded/cluster.py`).

Besides nothing lost, duplicated or wrong, the output resumes after every fault that met two
nodes or more up and reachable (within `STALL_BOUND_S`, a liveness bound; the longest stall is
printed at the end of the session beside its aim of 30 s), and Kafka's `find-hanging` finds no
hanging transaction on any node at the end.

`make test` runs the reduced size (two of each process fault, one of each cluster kind, a fixed
seed); `make chaos` (LOGWHEEL_CHAOS_FULL=1) runs 1,000,000+ records and 50 faults.
LOGWHEEL_CHAOS_SEED replays another seed; `python -m tests.chaos.seeded.run --cluster --seed N
[--full] --keep` replays one by hand.
"""

from __future__ import annotations

import pytest

from tests.chaos.seeded.run import (
    CLUSTER_FULL,
    CLUSTER_REDUCED,
    FULL_RUN,
    SEED,
    assert_passed,
    run_chaos,
)
from tests.support_cluster import STALL_AIM_S, STALL_BOUND_S

SIZE = CLUSTER_FULL if FULL_RUN else CLUSTER_REDUCED
RECORDS = 1_000_000 if FULL_RUN else 20_000

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(7200 if FULL_RUN else 900)]


def test_seeded_broker_and_network_faults_on_a_cluster_lose_and_duplicate_nothing(tmp_path, aim):
    outcome = run_chaos(tmp_path, SEED, SIZE)
    aim("seeded cluster run: longest stall with two nodes up", outcome.stall, STALL_AIM_S)
    assert_passed(outcome, SIZE, RECORDS)
    assert outcome.stall < STALL_BOUND_S, f"{outcome.line}\n(timeline.txt in {tmp_path})"
