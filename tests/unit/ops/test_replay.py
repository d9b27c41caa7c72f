"""What `logwheel dlq replay` (framework/ops/replay.py) decides without Kafka: a part whose dead
letters do not go back, or a rate that is no positive number, refused in one line before any
Kafka client is made; a dry run counting what it would send from the dead letters read,
making no producer; and the lines a report prints, dry and real. Where each dead letter goes
is tested in tests/unit/ops/test_replay_routing.py; sending, on a broker, in
tests/integration/test_dlq_replay.py."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from framework import windows
from framework.core.api import Computation
from framework.core.pipeline import InjectorWatermark, Pipeline, PipelineError, key_by
from framework.ops import replay as replaying
from framework.ops.dead_letter_log import DeadLetter
from framework.ops.replay import ReplayReport, Selection, replay
from tests.unit.sinks.fakes import IdleSink

KAFKA = ("create_topics", "Producer", "AdminClient", "read_limits", "read_dead_letters",
         "read_replayed")  # fmt: skip


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def shop() -> Pipeline:
    """A computation `c` reading `clicks` re-keyed by user and `views` by their Kafka key, a
    window, a sink and an injector."""
    p = Pipeline("p", partitions=4)
    p.source("clicks", watermark=InjectorWatermark("gen"))
    p.source("views")
    p.computation(
        "c", Noop, inputs={"clicks": key_by("user"), "views": None}, outputs={"out": None}
    )
    p.windowed(
        "w",
        inputs={"out": None},
        window=windows.Tumbling(1000),
        aggregate=windows.Count(),
        output="counts",
    )
    p.sink("db", inputs={"counts": None}, sink=IdleSink())
    return p


@pytest.fixture
def no_kafka(monkeypatch):
    """Every way `replay` reaches Kafka fails the test."""

    def reached(*args, **kwargs):
        raise AssertionError("replay reached Kafka")

    for name in KAFKA:
        monkeypatch.setattr(replaying, name, reached)


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_sink_is_refused_in_one_line_naming_the_parts_that_replay_before_any_kafka_client(
    no_kafka, dry_run
):
    with pytest.raises(PipelineError) as refused:
        replay(shop(), "db", "b:9092", dry_run=dry_run)
    assert str(refused.value) == (
        "sink 'db''s dead letters do not go back: only those of a part that re-runs its "
        "records do (here: c, w); a sink's are rows its target refused, to be fixed there"
    )


def test_a_part_that_is_not_declared_is_refused_naming_the_parts_before_any_kafka_client(no_kafka):
    with pytest.raises(PipelineError, match="^pipeline 'p' has no part 'nope'; it has comput"):
        replay(shop(), "nope", "b:9092")


@pytest.mark.parametrize("rate", [0.0, -2.5, float("nan"), float("inf")])
def test_a_rate_that_is_not_a_positive_number_is_refused_in_one_line_before_any_kafka_client(
    no_kafka, rate
):
    with pytest.raises(PipelineError) as refused:
        replay(shop(), "c", "b:9092", rate=rate)
    assert str(refused.value) == f"--rate {rate}: give a positive number of dead letters a second"


def letter(offset: int, source: str, value: bytes, *, stage="process_record", partition=1):
    headers = (
        ("logwheel.error.stage", stage.encode()),
        ("logwheel.source.topic", source.encode()),
        ("logwheel.source.partition", str(partition).encode()),
        ("logwheel.source.offset", str(offset).encode()),
    )
    return DeadLetter("p.c.dlq", 0, offset, b"k", value, 1000 + offset, headers, stage,
                      f"ValueError: {offset}", source, partition, offset, None)  # fmt: skip


def test_a_dry_run_counts_what_it_would_send_from_what_it_reads_and_makes_no_producer(
    no_kafka, monkeypatch
):
    ann = json.dumps({"user": "ann"}).encode()
    letters = [
        letter(0, "views", b"{}"),  # by its Kafka key: would go
        letter(1, "clicks", ann),  # re-keyed by the extractor: would go
        letter(2, "views", b"{}"),  # replayed before
        letter(3, "elsewhere", b"{}"),  # of no input of c: kept
        letter(4, "clicks", b"not json"),  # still fails: dead-lettered again
        letter(5, "views", b"{}", stage="decode"),  # not selected
    ]
    read = []

    def reading(what, answer):
        def read_topic(*args):
            read.append((what, *args))
            return answer

        return read_topic

    monkeypatch.setattr(replaying, "read_dead_letters", reading("dlq", letters))
    monkeypatch.setattr(replaying, "read_replayed", reading("replayed", {"p.c.dlq/0/2": {}}))
    kafka = {"security.protocol": "SSL"}
    report = replay(
        shop(), "c", "b:9092", Selection(stage="process_record"), dry_run=True, kafka=kafka
    )
    assert read == [
        ("dlq", "b:9092", "p.c.dlq", kafka),
        ("replayed", "b:9092", "p.c.replayed", kafka),
    ]
    assert (report.topic, report.dry_run) == ("p.c.dlq", True)
    assert (report.matched, report.already, report.sent, report.failed_again) == (5, 1, 2, 1)
    assert report.kept == Counter({"read from elsewhere, which is no input of c": 1})


def test_a_dry_runs_report_says_what_it_would_send_and_why_the_rest_cannot_go():
    kept = Counter({"read from no topic (a timer's firing), which is no input of c": 1,
                    "its value was cut to fit the dead-letter topic": 2})  # fmt: skip
    report = ReplayReport("p.c.dlq", matched=9, already=2, sent=3, failed_again=1, kept=kept,
                          dry_run=True)  # fmt: skip
    assert report.lines() == [
        "p.c.dlq: 9 dead letters match, 2 already replayed; would send 3 to the replay topic, "
        "1 still fail and are dead-lettered again",
        "  not replayable: 2 (its value was cut to fit the dead-letter topic)",
        "  not replayable: 1 (read from no topic (a timer's firing), which is no input of c)",
    ]


def test_a_real_runs_report_says_what_it_sent_and_names_no_failure_when_none_failed():
    assert ReplayReport("p.c.dlq", matched=4, already=1, sent=3).lines() == [
        "p.c.dlq: 4 dead letters match, 1 already replayed; sent 3 to the replay topic"
    ]
    again = ReplayReport("p.c.dlq", matched=6, already=0, sent=3, failed_again=2)
    again.kept["it does not say where it was read"] += 1
    assert again.lines() == [
        "p.c.dlq: 6 dead letters match, 0 already replayed; sent 3 to the replay topic, "
        "2 still fail and are dead-lettered again",
        "  not replayable: 1 (it does not say where it was read)",
    ]
