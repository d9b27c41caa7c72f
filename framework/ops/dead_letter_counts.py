"""`logwheel dlq ls`: how many dead letters a part (a computation, a sink) has, by stage and
reason, how many were sent back by `logwheel dlq replay`, and the newest few with where they
were read.

`summarize` is the pure count; `dead_letter_summary` reads one topic for it, and
`dead_letters_by_stage` gives every part's counts by stage, for a dashboard.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from framework.core.part import own_topic
from framework.core.pipeline import Pipeline, PipelineError
from framework.ops.dead_letter_log import (
    DeadLetter,
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
    """The dead letters of one part, counted."""

    name: str  # the part
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
    """The summary of part `name`'s dead letters, as the broker has them now (none while its
    topics are not made yet), with how many a replayable part was sent back."""
    part = pipeline.part(name)
    if part.dlq is None:
        raise PipelineError(
            f"{part.kind} {name!r} keeps no dead letters: name a part that reads records "
            f"({', '.join(p.name for p in pipeline.parts() if p.dlq)})"
        )
    letters = read_dead_letters(bootstrap, part.dlq, kafka, must_exist=False)
    replayed = (
        read_replayed(bootstrap, own_topic(part, "replayed"), kafka) if part.replayable else {}
    )
    return summarize(name, part.dlq, letters, replayed, newest)


def dead_letters_by_stage(
    pipeline: Pipeline, bootstrap: str, kafka: dict | None = None
) -> dict[str, dict[str, int]]:
    """For every part of `pipeline` that keeps dead letters: its dead letters by stage, as
    `dlq ls` counts them (`{}`: none, or no topic yet)."""
    counts = {}
    for part in pipeline.parts():
        if part.dlq is not None:
            letters = read_dead_letters(bootstrap, part.dlq, kafka, must_exist=False)
            counts[part.name] = summarize(part.name, part.dlq, letters, {}).stages
    return counts
