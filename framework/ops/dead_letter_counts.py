"""`logwheel dlq ls`: how many dead letters a computation (or a sink) has, by stage and reason,
how many were sent back by `logwheel dlq replay`, and the newest few with where they were read.

`summarize` is the pure count; `dead_letter_summary` reads one topic for it, and
`dead_letters_by_stage` gives every computation's (and sink's) counts by stage, for a
dashboard.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from framework.core.pipeline import Pipeline
from framework.ops.dead_letter_log import (
    DeadLetter,
    dlq_topic,
    read_dead_letters,
    read_replayed,
)

NEWEST = 5
"""How many of the newest dead letters `dlq ls` shows."""


@dataclass(frozen=True)
class ReasonCount:
    stage: str
    reason: str
    count: int
    replayed: int


@dataclass(frozen=True)
class DeadLetterSummary:
    """The dead letters of one computation or sink, counted."""

    name: str  # the computation or sink
    topic: str  # its dead-letter topic
    total: int
    replayed: int  # sent back by `logwheel dlq replay`
    stages: dict[str, int]  # stage -> count
    reasons: list[ReasonCount]  # by stage and reason, the most frequent first
    newest: list[dict] = field(default_factory=list)  # `DeadLetter.describe`, newest first

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "topic": self.topic,
            "total": self.total,
            "replayed": self.replayed,
            "stages": self.stages,
            "reasons": [vars(r) for r in self.reasons],
            "newest": self.newest,
        }


def summarize(
    name: str,
    topic: str,
    letters: Iterable[DeadLetter],
    replayed: Mapping[str, object],
    newest: int = NEWEST,
) -> DeadLetterSummary:
    """Count `letters` by stage and by (stage, reason); `replayed` names those sent back."""
    letters = list(letters)
    stages: Counter[str] = Counter()
    reasons: Counter[tuple[str, str]] = Counter()
    sent: Counter[tuple[str, str]] = Counter()
    for letter in letters:
        stages[letter.stage] += 1
        reasons[(letter.stage, letter.reason)] += 1
        if letter.ident in replayed:
            sent[(letter.stage, letter.reason)] += 1
    by_reason = [
        ReasonCount(stage, reason, n, sent[(stage, reason)])
        for (stage, reason), n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    latest = sorted(letters, key=lambda d: (d.partition, d.offset), reverse=True)[:newest]
    described = [{**d.describe(), "replayed": d.ident in replayed} for d in latest]
    return DeadLetterSummary(
        name,
        topic,
        len(letters),
        sum(sent.values()),
        dict(sorted(stages.items())),
        by_reason,
        described,
    )


def dead_letter_summary(
    pipeline: Pipeline,
    name: str,
    bootstrap: str,
    kafka: dict | None = None,
    newest: int = NEWEST,
) -> DeadLetterSummary:
    """The summary of computation (or sink) `name`'s dead letters, as the broker has them now
    (none for a computation whose topics are not made yet); for a sink, any
    `<pipeline>.<sink>.dlq` that exists: a configuration error naming the fix if none does."""
    topic = dlq_topic(pipeline, name)
    spec = pipeline.computations.get(name)
    letters = read_dead_letters(bootstrap, topic, kafka, must_exist=spec is None)
    replayed = read_replayed(bootstrap, spec.replayed, kafka) if spec is not None else {}
    return summarize(name, topic, letters, replayed, newest)


def dead_letters_by_stage(
    pipeline: Pipeline,
    bootstrap: str,
    kafka: dict | None = None,
    sinks: Iterable[str] | None = None,
) -> dict[str, dict[str, int]]:
    """For every computation of `pipeline` and every sink (`sinks`, else those it declares):
    its dead letters by stage, as `dlq ls` counts them (`{}`: none, or no topic yet)."""
    names = [*pipeline.computations, *(getattr(pipeline, "sinks", {}) if sinks is None else sinks)]
    counts = {}
    for name in names:
        topic = dlq_topic(pipeline, name)
        letters = read_dead_letters(bootstrap, topic, kafka, must_exist=False)
        counts[name] = summarize(name, topic, letters, {}).stages
    return counts
