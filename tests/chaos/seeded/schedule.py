"""A fault schedule drawn from one seed, so a failing run can be replayed: the same seed gives
the same faults, at the same offsets from the start, on the same targets.

Broker faults (a stop and start, a SIGKILL and start) take the broker lane one at a time;
process faults (SIGKILL, SIGSTOP then SIGCONT, a state directory wiped while the instance is
down, followed by a SIGKILL during its restore) and malformed input take the process lane, so
they overlap broker outages as real failures do.

The cluster mode's broker and network faults (`CLUSTER_KINDS`, done by
`tests/chaos/seeded/cluster.py`) take the broker lane too: one node of three at a time.
Their targets are a node (1-3) drawn here, or, for `controller-kill` (target 0) and
`commit-reset` (target: an instance), the node holding that role when the fault comes.
Drawing them never changes the single-broker mode's schedule of a seed (its kinds are drawn
first, in the same order, from the same generator).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

BROKER_KINDS = ("broker-stop", "broker-kill")
PROCESS_KINDS = ("sigkill", "sigstop", "wipe-state", "malformed")
KINDS = (*PROCESS_KINDS, *BROKER_KINDS)
CLUSTER_KINDS = ("node-kill", "node-stop", "controller-kill", "proxy-cut", "latency")
CLUSTER_KINDS += ("commit-reset",)
CLUSTER_MODE_KINDS = (*PROCESS_KINDS, *CLUSTER_KINDS)
LANE_KINDS = (*BROKER_KINDS, *CLUSTER_KINDS)
"""The kinds done one at a time on the broker lane."""
NODE_STOP_HOLD = (10.0, 20.0)
"""A stopped node stays down past Kafka's broker session timeout (9 s): it is fenced."""


@dataclass(frozen=True)
class Fault:
    """One fault: `at` seconds after the start, of `kind`, on instance `target` (an index
    into the run's instances; the malformed shape for "malformed"), held `hold` seconds
    (SIGSTOP: until SIGCONT; broker and wipe faults: down time before the restart; a proxy
    cut, latency or commit reset: how long it lasts); `latency_ms` for a latency fault."""

    at: float
    kind: str
    target: int
    hold: float = 0.0
    latency_ms: int = 0


def draw(
    seed: int,
    span: float,
    per_kind: int | dict[str, int],
    instances: int,
    *,
    shapes: int = 1,
    sigstop_hold: tuple[float, float] = (5.0, 7.0),
    cut_hold: tuple[float, float] = (5.0, 60.0),
    kinds: tuple[str, ...] = KINDS,
) -> list[Fault]:
    """`per_kind` faults (or `per_kind[kind]`) of each of `kinds` within `span` seconds,
    sorted by time.

    Faults of one kind are spread over the span in equal slots with a random moment in each,
    so every phase of the run (start, steady state, the tail) meets every kind."""
    rng = random.Random(seed)
    faults = []
    for kind in kinds:
        count = per_kind[kind] if isinstance(per_kind, dict) else per_kind
        slot = span / count
        for i in range(count):
            at = round(1.0 + slot * i + rng.uniform(0, slot * 0.8), 2)
            if kind in CLUSTER_KINDS:
                faults.append(_cluster_fault(rng, at, kind, instances, cut_hold))
                continue
            if kind == "malformed":
                target, hold = rng.randrange(shapes), 0.0
            elif kind in BROKER_KINDS:
                target, hold = 0, round(rng.uniform(0.2, 2.0), 2)
            elif kind == "sigstop":
                target, hold = rng.randrange(instances), round(rng.uniform(*sigstop_hold), 2)
            else:
                target, hold = rng.randrange(instances), round(rng.uniform(0.1, 1.0), 2)
            faults.append(Fault(at, kind, target, hold))
    return sorted(faults, key=lambda f: (f.at, f.kind))


def _cluster_fault(
    rng: random.Random, at: float, kind: str, instances: int, cut_hold: tuple[float, float]
) -> Fault:
    if kind == "controller-kill":
        return Fault(at, kind, 0, round(rng.uniform(1.0, 8.0), 2))
    if kind == "commit-reset":
        return Fault(at, kind, rng.randrange(instances), round(rng.uniform(0.3, 0.9), 2))
    node = rng.randint(1, 3)
    if kind == "node-kill":
        return Fault(at, kind, node, round(rng.uniform(1.0, 8.0), 2))
    if kind == "node-stop":
        return Fault(at, kind, node, round(rng.uniform(*NODE_STOP_HOLD), 2))
    if kind == "proxy-cut":
        return Fault(at, kind, node, round(rng.uniform(*cut_hold), 2))
    return Fault(at, kind, node, round(rng.uniform(5.0, 15.0), 2), rng.randint(200, 2000))


def by_kind(faults: list[Fault]) -> dict[str, int]:
    counts = Counter(f.kind for f in faults)
    return {kind: counts[kind] for kind in (*KINDS, *CLUSTER_KINDS) if counts[kind]}
