"""A fault schedule drawn from one seed, so a failing run can be replayed: the same seed gives
the same faults, at the same offsets from the start, on the same targets.

Broker faults (a stop and start, a SIGKILL and start) take the broker lane one at a time;
process faults (SIGKILL, SIGSTOP then SIGCONT, a state directory wiped while the instance is
down, followed by a SIGKILL during its restore) and malformed input take the process lane, so
they overlap broker outages as real failures do.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

BROKER_KINDS = ("broker-stop", "broker-kill")
PROCESS_KINDS = ("sigkill", "sigstop", "wipe-state", "malformed")
KINDS = (*PROCESS_KINDS, *BROKER_KINDS)


@dataclass(frozen=True)
class Fault:
    """One fault: `at` seconds after the start, of `kind`, on instance `target` (an index
    into the run's instances; the malformed shape for "malformed"), held `hold` seconds
    (SIGSTOP: until SIGCONT; broker and wipe faults: down time before the restart)."""

    at: float
    kind: str
    target: int
    hold: float = 0.0


def draw(
    seed: int,
    span: float,
    per_kind: int,
    instances: int,
    *,
    shapes: int = 1,
    sigstop_hold: tuple[float, float] = (5.0, 7.0),
    kinds: tuple[str, ...] = KINDS,
) -> list[Fault]:
    """`per_kind` faults of each of `kinds` within `span` seconds, sorted by time.

    Faults of one kind are spread over the span in equal slots with a random moment in each,
    so every phase of the run (start, steady state, the tail) meets every kind."""
    rng = random.Random(seed)
    faults = []
    for kind in kinds:
        slot = span / per_kind
        for i in range(per_kind):
            at = round(1.0 + slot * i + rng.uniform(0, slot * 0.8), 2)
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


def by_kind(faults: list[Fault]) -> dict[str, int]:
    counts = Counter(f.kind for f in faults)
    return {kind: counts[kind] for kind in KINDS if counts[kind]}
