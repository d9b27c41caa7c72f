"""`logwheel dlq replay`: send a computation's dead letters back to it, each exactly once.

Each matching dead letter not yet replayed goes to `<pipeline>.<computation>.replay`, routed
by the stream it was read from (framework/ops/replay_routing.py), and is recorded in the
compacted `<pipeline>.<computation>.replayed` in the same Kafka transaction (invariant 8). The
transactional id is the computation's own replayer's, `<pipeline>.<computation>.replayer`: a
replayer that starts aborts what a killed one left open and fences one still running, and only
then reads what `.replayed` says was sent. So a replay killed at any point, and run again,
sends every dead letter once; a second replay sends nothing.

A dead letter the current code still cannot route (its value still undecodable, its key
extractor still failing) is dead-lettered again at once, naming what it replays, and recorded
as replayed: after the next fix, the new dead letter is what is replayed.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.errors import BadRecord
from framework.kafka.config import client_config, producer_config
from framework.kafka.limits import TopicLimits, read_limits
from framework.kafka.output import dead_letter_record
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.replays import REPLAY_OF
from framework.kafka.topics import create_topics
from framework.ops.dead_letter_log import DeadLetter, read_dead_letters, read_replayed
from framework.ops.replay_routing import Router, replay_record, replayed_record

BATCH = 500
"""Dead letters per transaction at most."""
TIMEOUT_S = 60


@dataclass(frozen=True)
class Selection:
    """Which dead letters to replay: by stage, by a text their reason contains, by their
    timestamp (the original record's; `since` inclusive, `until` exclusive, ms)."""

    stage: str | None = None
    reason: str | None = None
    since: int | None = None
    until: int | None = None

    def matches(self, letter: DeadLetter) -> bool:
        return (
            (self.stage is None or letter.stage == self.stage)
            and (self.reason is None or self.reason in letter.reason)
            and (self.since is None or letter.timestamp >= self.since)
            and (self.until is None or letter.timestamp < self.until)
        )


@dataclass
class ReplayReport:
    """What a replay did (or, dry, would do)."""

    topic: str
    matched: int = 0  # dead letters the selection takes
    already: int = 0  # of those, replayed before
    sent: int = 0  # to the replay topic
    failed_again: int = 0  # dead-lettered again at once: still not routable
    kept: Counter[str] = field(default_factory=Counter)  # not replayable: why -> how many
    dry_run: bool = False

    def lines(self) -> list[str]:
        verb = "would send" if self.dry_run else "sent"
        out = [
            f"{self.topic}: {self.matched} dead letters match, {self.already} already replayed; "
            f"{verb} {self.sent} to the replay topic"
            + (
                f", {self.failed_again} still fail and are dead-lettered again"
                if self.failed_again
                else ""
            )
        ]
        out += [f"  not replayable: {n} ({why})" for why, n in sorted(self.kept.items())]
        return out


def replay(
    pipeline: Pipeline,
    computation: str,
    bootstrap: str,
    selection: Selection = Selection(),  # noqa: B008 - frozen
    *,
    dry_run: bool = False,
    rate: float | None = None,
    kafka: dict | None = None,
    registry: RegistrySettings | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Replay `computation`'s dead letters that `selection` takes and that were not replayed
    yet; at most `rate` a second. `progress(done, total)` is called after each transaction."""
    part = pipeline.part(computation)
    if not part.replayable:
        replayable = ", ".join(p.name for p in pipeline.parts() if p.replayable)
        raise PipelineError(
            f"{part.kind} {computation!r}'s dead letters do not go back: only those of a part "
            f"that re-runs its records do (here: {replayable}); a sink's are rows its target "
            "refused, to be fixed there"
        )
    spec = pipeline[computation]
    if rate is not None and not 0 < rate < math.inf:  # nan, inf: no batch size to send in
        raise PipelineError(f"--rate {rate}: give a positive number of dead letters a second")
    producer = None
    if not dry_run:
        create_topics(bootstrap, pipeline, client_config=kafka, part=spec.name)
        producer = _replayer(bootstrap, spec, kafka)  # aborts a killed one's open transaction
    try:
        letters = read_dead_letters(bootstrap, spec.dlq, kafka)
        done = read_replayed(bootstrap, spec.replayed, kafka)
        report = ReplayReport(spec.dlq, dry_run=dry_run)
        router = Router(pipeline, spec, registry)
        todo: list[tuple[DeadLetter, object]] = []
        for letter in letters:
            if not selection.matches(letter):
                continue
            report.matched += 1
            if letter.ident in done:
                report.already += 1
                continue
            try:
                way = router.route(letter)
            except BadRecord as error:
                way = error
            if isinstance(way, str):
                report.kept[way] += 1
            else:
                todo.append((letter, way))
        if producer is None:
            report.sent = sum(1 for _, way in todo if not isinstance(way, BadRecord))
            report.failed_again = len(todo) - report.sent
            return report
        _send(producer, spec, bootstrap, kafka, todo, report, rate, progress)
        return report
    finally:
        if producer is not None:
            producer.flush(TIMEOUT_S)
            producer.poll(0)  # the transactions' events served: none left to purge at close
            producer.close()


def _replayer(bootstrap: str, spec: ComputationSpec, kafka: dict | None) -> Producer:
    config = producer_config(bootstrap, transactional_id=f"{spec.group}.replayer", extra=kafka)
    producer = Producer(config)
    producer.init_transactions(TIMEOUT_S)
    return producer


def _send(
    producer: Producer,
    spec: ComputationSpec,
    bootstrap: str,
    kafka: dict | None,
    todo: list,
    report: ReplayReport,
    rate: float | None,
    progress: Callable[[int, int], None] | None,
) -> None:
    """Send `todo` in transactions of `BATCH` (or, rate-limited, a second's worth) each."""
    batch = BATCH if rate is None else max(1, min(BATCH, int(rate)))
    limits = read_limits(AdminClient(client_config(bootstrap, kafka)), [spec.dlq])
    started, total = time.monotonic(), len(todo)
    if progress is not None and total:
        progress(0, total)
    for first in range(0, total, batch):
        producer.begin_transaction()
        for letter, way in todo[first : first + batch]:
            if isinstance(way, BadRecord):
                topic, key, value, _, ts, headers = _again(spec, limits, letter, way)
                producer.produce(topic, value, key, timestamp=ts, headers=headers)
                what = {"dead_lettered_again": way.stage}
                report.failed_again += 1
            else:
                topic, key, value, partition, ts, headers = replay_record(spec, letter, way)
                producer.produce(
                    topic, value, key, partition=partition, timestamp=ts, headers=headers
                )
                what = {"stream": way.stream, "partition": way.partition}
                report.sent += 1
            topic, key, value, partition, _, _ = replayed_record(spec, letter, what)
            producer.produce(topic, value, key, partition=partition)
        producer.commit_transaction(TIMEOUT_S)
        done = min(total, first + batch)
        if progress is not None:
            progress(done, total)
        if rate is not None and done < total:
            time.sleep(max(0.0, done / rate - (time.monotonic() - started)))


def _again(
    spec: ComputationSpec, limits: TopicLimits, letter: DeadLetter, error: BadRecord
) -> tuple:
    """The new dead letter of a dead letter the current code still cannot route: as the
    original's, read where the original was, naming what it replays."""
    topic, key, value, partition, ts, headers = dead_letter_record(
        spec.dlq, limits, error, error.stage, _Source(letter), None, spec.replay
    )  # one read from the replay topic keeps the stream it names
    headers = [(k, v) for k, v in headers or () if k != REPLAY_OF]
    headers.append((REPLAY_OF, letter.ident.encode()))
    return topic, key, value, partition, ts, headers


class _Source:
    """A dead letter as the `Source` it was read from, for `dead_letter_record`."""

    def __init__(self, letter: DeadLetter) -> None:
        self._letter = letter

    def key(self) -> bytes | None:
        return self._letter.key

    def value(self) -> bytes | None:
        return self._letter.value

    def timestamp(self) -> tuple[int, int]:
        return 1, self._letter.timestamp

    def topic(self) -> str | None:
        return self._letter.source_topic

    def partition(self) -> int | None:
        return self._letter.source_partition

    def offset(self) -> int | None:
        return self._letter.source_offset

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return list(self._letter.headers)
