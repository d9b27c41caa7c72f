"""A backfill task's global tables (framework/backfill/global_tables.py), read over a stand-in
consumer: every partition of each table's topic from its start to its end, the latest value per
key (a tombstone removing it) or, with history_ms, what a key held as of a time, judged by the
plan's wall time; a record without a key said and not applied; a table whose topic does not
exist refused; no consumer at all for a computation without global tables. On Spark and
Kafka: tests/integration/test_backfill.py."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError

from framework import Computation, GlobalTable, Pipeline
from framework.backfill import global_tables
from framework.backfill.global_tables import read_global_tables
from framework.core.global_tables import TableHistoryExpired
from framework.core.pipeline import PipelineError
from tests.unit.state.fakes import FakeLog

DAY = 86_400_000
WALL = 10 * DAY


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


PIPELINE = Pipeline("bf").source("orders")
PIPELINE.computation(
    "convert",
    Nothing,
    inputs={"orders": None},
    global_tables={"rates": GlobalTable("fx.rates", history_ms=DAY), "names": "fx.names"},
)
PIPELINE.computation("plain", Nothing, inputs={"orders": None})


class Topics(FakeLog):
    """The consumer a backfill task reads its tables with: the logs' topics are its cluster's.
    As Kafka's, its metadata of a topic that does not exist is an error and no partition."""

    def __init__(self) -> None:
        super().__init__()
        self.assigned: list[tuple[str, int, int]] = []

    def list_topics(self, topic, timeout=None):
        partitions = dict.fromkeys(p for t, p in self.logs if t == topic)
        error = None if partitions else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        return SimpleNamespace(topics={topic: SimpleNamespace(error=error, partitions=partitions)})

    def assign(self, tps):
        self.assigned += [(tp.topic, tp.partition, tp.offset) for tp in tps]
        self.incremental_assign(tps)


@pytest.fixture
def cluster(monkeypatch):
    log, configs = Topics(), []

    def consumer(config):
        configs.append(config)
        return log

    monkeypatch.setattr(global_tables, "Consumer", consumer)
    log.configs = configs
    return log


def value(**fields) -> bytes:
    return json.dumps(fields).encode()


def read(cluster):
    return read_global_tables(PIPELINE, PIPELINE["convert"], "b:9092", {}, None, WALL)


def test_every_partition_of_each_table_is_read_from_its_start_and_a_key_holds_its_latest(cluster):
    cluster.write("fx.names", 0, (b"eur", value(name="euro")), (b"usd", value(name="dollar")))
    cluster.write("fx.names", 1, (b"chf", value(name="franc")), (b"eur", value(name="Euro")))
    cluster.write("fx.names", 2, (b"chf", None))
    cluster.write("fx.rates", 0)
    tables = read(cluster)
    names = tables["names"]
    assert (names.get("eur"), names.get("usd"), names.get("chf")) == (
        {"name": "Euro"}, {"name": "dollar"}, None,
    )  # fmt: skip
    assert sorted(cluster.assigned) == [("fx.names", p, OFFSET_BEGINNING) for p in range(3)] + [
        ("fx.rates", 0, OFFSET_BEGINNING)
    ]
    assert cluster.configs[0]["group.id"] == "bf.convert.reader" and cluster.closed


def test_tables_of_one_record_each_are_read_too(cluster):
    cluster.write("fx.names", 0, (b"eur", value(name="euro")))
    cluster.write("fx.rates", 0, (b"eur", value(rate=1.1), WALL))
    tables = read(cluster)
    assert (tables["names"].get("eur"), tables["rates"].get("eur")) == (
        {"name": "euro"}, {"rate": 1.1},
    )  # fmt: skip


def test_with_history_a_lookup_answers_what_the_key_held_as_of_a_time(cluster):
    cluster.write("fx.rates", 0, (b"eur", value(rate=1.1), WALL - 2 * DAY),
                  (b"eur", value(rate=1.2), WALL - 1000))  # fmt: skip
    cluster.write("fx.names", 0)
    rates = read(cluster)["rates"]
    assert rates.get("eur", as_of=WALL - DAY) == {"rate": 1.1}
    assert rates.get("eur") == {"rate": 1.2}
    with pytest.raises(TableHistoryExpired):
        rates.get("eur", as_of=WALL - 3 * DAY)


def test_a_record_stamped_far_past_the_wall_time_does_not_expire_the_history(cluster):
    cluster.write("fx.rates", 0, (b"eur", value(rate=1.1), WALL - 1000),
                  (b"gbp", value(rate=0.8), WALL + 30 * DAY))  # fmt: skip
    cluster.write("fx.names", 0)
    rates = read(cluster)["rates"]
    assert rates.get("eur", as_of=WALL - 500) == {"rate": 1.1}


def test_a_record_without_a_key_is_said_and_not_applied(cluster, caplog):
    cluster.write("fx.names", 0, (None, value(name="nobody")), (b"eur", value(name="euro")))
    cluster.write("fx.rates", 0)
    with caplog.at_level(logging.WARNING, logger=global_tables.__name__):
        names = read(cluster)["names"]
    assert names.get("eur") == {"name": "euro"} and "" not in names
    assert "'names' (fx.names): 1 records without a key not applied" in caplog.text


def test_a_table_whose_topic_does_not_exist_is_refused_not_read_empty(cluster):
    cluster.write("fx.names", 0, (b"eur", value(name="euro")))
    with pytest.raises(PipelineError, match=r"global table 'rates' from 'fx.rates', which does no"):
        read(cluster)
    assert cluster.closed


def test_a_computation_without_global_tables_reads_nothing(cluster):
    assert read_global_tables(PIPELINE, PIPELINE["plain"], "b:9092", {}, None, WALL) == {}
    assert cluster.configs == []
