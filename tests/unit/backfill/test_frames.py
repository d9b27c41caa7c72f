"""What the backfill asks Spark's Kafka source for (backfill/frames.py): the plan's ranges as
the source's assign and offsets options, only the non-empty ones, read_committed; the
journals' ranges from their low offsets; when the tasks are the Kafka partitions. The frames
Spark builds from them are checked against a real Spark and broker in
tests/integration/test_backfill*.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

from framework.backfill import frames
from framework.backfill.plan import Plan, Range


class Reader:
    """Spark's DataFrameReader as far as `read` uses it: a format, options, a load."""

    def __init__(self) -> None:
        self.format_name, self.options, self.loads = None, {}, 0

    @property
    def read(self) -> Reader:  # spark.read
        return self

    def format(self, name: str) -> Reader:
        self.format_name = name
        return self

    def option(self, key: str, value: object) -> Reader:
        self.options[key] = value
        return self

    def load(self) -> str:
        self.loads += 1
        return "frame"


def test_the_source_reads_the_non_empty_ranges_from_their_start_to_their_end():
    spark = Reader()
    ranges = [
        Range("clicks", 0, 5, 9, "clicks", True),
        Range("clicks", 2, 0, 3, "clicks", True),
        Range("clicks", 1, 7, 7, "clicks", True),  # empty: not asked for
        Range("views", 0, 10, 20, "views", False),
    ]
    assert frames.read(spark, ranges, "h:1", {"security.protocol": "SSL"}) == "frame"
    options = spark.options
    assert spark.format_name == "kafka" and spark.loads == 1
    assert options["kafka.bootstrap.servers"] == "h:1"
    assert options["kafka.isolation.level"] == "read_committed"  # only committed records
    assert options["kafka.security.protocol"] == "SSL"
    assert json.loads(options["assign"]) == {"clicks": [0, 2], "views": [0]}
    assert json.loads(options["startingOffsets"]) == {
        "clicks": {"0": 5, "2": 0},
        "views": {"0": 10},
    }
    assert json.loads(options["endingOffsets"]) == {"clicks": {"0": 9, "2": 3}, "views": {"0": 20}}


def test_nothing_to_read_is_no_frame_and_no_spark_job():
    spark = Reader()
    assert frames.read(spark, [Range("clicks", 0, 4, 4, "clicks", True)], "h:1", {}) is None
    assert spark.loads == 0


def test_a_journal_is_read_from_its_low_offset_to_the_plans_end(monkeypatch):
    lows = {0: 3, 1: 0}
    closed, configs = [], []

    class Consumer:  # a compacted journal's first offsets, as the broker reports them
        def __init__(self, config: dict) -> None:
            configs.append(config)

        def get_watermark_offsets(self, tp, timeout):
            return lows[tp.partition], 100

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(frames, "Consumer", Consumer)
    ranges = frames.journal_ranges("p.c.changelog", {0: 40, 1: 0}, "h:1", "p.c.reader", {})
    assert ranges == [
        Range("p.c.changelog", 0, 3, 40, "", True),
        Range("p.c.changelog", 1, 0, 0, "", True),
    ]
    assert closed == [True]
    assert configs[0]["group.id"] == "p.c.reader"  # the pipeline's reader, never its group


def _plan(ranges: tuple[Range, ...], tasks: int) -> Plan:
    return Plan("c", ranges, tasks, {}, {}, {}, None, 0)


def test_the_tasks_are_the_kafka_partitions_only_when_plan_and_source_agree():
    keyed = (Range("clicks", 0, 0, 5, "clicks", True), Range("clicks", 1, 0, 5, "clicks", True))
    source = SimpleNamespace(rdd=SimpleNamespace(getNumPartitions=lambda: 2))
    assert frames._one_task_per_partition(_plan(keyed, 2), source)
    assert not frames._one_task_per_partition(_plan(keyed, 4), source)  # asked for 4 tasks
    rekeyed = (keyed[0], Range("views", 0, 0, 5, "views", False))
    assert not frames._one_task_per_partition(_plan(rekeyed, 2), source)
    three = SimpleNamespace(rdd=SimpleNamespace(getNumPartitions=lambda: 3))
    assert not frames._one_task_per_partition(_plan(keyed, 2), three)
