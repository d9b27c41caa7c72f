"""The check every benchmark makes before it prints a figure: what a contender wrote against a
reference worked out from the input alone, so that no figure of a wrong run is ever shown.

A benchmark turns each output record into a result (a hashable: `(word, word, count)` for a
count, `(key, window start, count)` for a window, a sequence number for a record delay) and
builds the reference: the results the input calls for, each as many times as it must appear.
Once the contender has stopped, `read` reads its output topics from their start to their end
(read_committed: what any consumer would see; to the end offsets, not until nothing new comes
for a while, so a duplicate written late is read too), and `compare` counts

- `missing`: results the reference calls for that were not written (as often as they lack);
- `unexpected`: distinct results written that the reference does not have (a wrong count is
  one missing and one unexpected);
- `duplicated`: writes of a result beyond the times the reference calls for;
- `late`: results that became readable only after the measurement had ended (the contender's
  time would be too short), counted when a benchmark times a run until its outputs are in.

A contender passes when all four are 0; `failures` says which did not, one line each, and a
benchmark exits 1 (and prints no figure of theirs) when there is any.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from framework.kafka.topic_ends import Ends, read_to_end
from tests.support import unique_name

COUNTS = ("missing", "unexpected", "duplicated", "late")
EXAMPLES = 3  # results of each kind named in a failure line
READ_TIMEOUT_S = 300.0  # a liveness bound: a million outputs read in well under a minute


def compare(
    expected: Mapping[Hashable, int] | Iterable[Hashable],
    written: Mapping[Hashable, int],
    *,
    short_at_end: int = 0,
) -> dict:
    """`written` (result -> times written) against `expected` (a multiset, or results each
    expected once): the four counts and a few `examples` of each wrong result.
    `short_at_end`: how many expected outputs were not yet readable when the measurement
    ended; those found afterwards are `late`."""
    want = collections.Counter(expected)
    missing = want - collections.Counter(written)
    unexpected = [r for r in written if r not in want]
    duplicated = {r: n - max(want[r], 1) for r, n in written.items() if n > max(want[r], 1)}
    lacking = sum(missing.values())
    found = {
        "missing": lacking,
        "unexpected": len(unexpected),
        "duplicated": sum(duplicated.values()),
        "late": max(0, short_at_end - lacking),
    }
    examples = [f"missing {r!r}" for r in list(missing)[:EXAMPLES]]
    examples += [f"unexpected {r!r}" for r in unexpected[:EXAMPLES]]
    examples += [f"{r!r} written {written[r]} times" for r in list(duplicated)[:EXAMPLES]]
    return {**found, "examples": examples}


def passed(check: Mapping) -> bool:
    return not any(check.get(k) for k in COUNTS)


def describe(check: Mapping) -> str:
    """'checked: 0 missing, ...' or 'WRONG: 2 missing, ... (e.g. ...)'."""
    counts = ", ".join(f"{check.get(k, 0)} {k}" for k in COUNTS)
    if passed(check):
        return f"checked: {counts}"
    return f"WRONG: {counts} (e.g. {'; '.join(check.get('examples', [])) or '-'})"


def worst(runs: Sequence[Mapping]) -> dict:
    """A row's check over its runs: each count the worst run's, every run's examples."""
    return {
        **{k: max(r.get(k, 0) for r in runs) for k in COUNTS},
        "examples": [e for r in runs for e in r.get("examples", [])][: 4 * EXAMPLES],
    }


def failures(rows: Iterable[Mapping], name: Callable[[Mapping], str] | None = None) -> list[str]:
    """One line per row whose check did not pass."""
    name = name or (lambda r: r["contender"])
    return [f"FAILED: {name(r)}: {describe(r)}" for r in rows if not passed(r)]


def report(lines: Sequence[str]) -> int:
    """Print the failure lines (`failures`); the exit code: 1 if there is any, else 0."""
    for line in lines:
        print(line, flush=True)
    if lines:
        print("outputs differ from the reference: no figure of a wrong run is shown", flush=True)
    return 1 if lines else 0


def read(
    bootstrap: str,
    topics: Iterable[str],
    result: Callable[[Message], Hashable],
    *,
    timeout: float = READ_TIMEOUT_S,
) -> collections.Counter:
    """Every record of `topics` from their start to where they end now, read_committed, as
    `result(record)`, counted. Read once whatever writes them has stopped: then their end is
    final and every record committed, a late duplicate included, is read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("bench-check"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    written: collections.Counter = collections.Counter()
    try:
        partitions = []
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=30).topics[topic]
            partitions += [(topic, p) for p in meta.partitions]
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
        ends = Ends(consumer)
        ends.add(partitions)
        read_to_end(ends, lambda msgs: written.update(map(result, msgs)), timeout=timeout)
    finally:
        consumer.close()
    return written
