"""Helpers for the PostgreSQL sink's tests: a job writing `<prefix>orders` into a table of its
own, its input, and what the table must hold in the end."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psycopg

from tests.support import Job, UniqueJob, produce, read_topic, wait_for

ORDERS_TABLE = """CREATE TABLE {table} (
    order_id text, amount integer CHECK (amount >= 0), customer text,
    logwheel_id text NOT NULL)"""
TOTALS_TABLE = (
    "CREATE TABLE {table} (key text PRIMARY KEY, total bigint, n integer, logwheel_id text)"
)


class OrdersSink:
    """The `orders_sink` job (tests/integration/sink_job.py) under a unique name, its table
    made in the test server's database."""

    def __init__(
        self, bootstrap: str, tmp: Path, dsn: str, *, key: tuple | None = None, batch: int = 200,
        ddl: str = ORDERS_TABLE, factory: str = "tests.integration.sink_job:orders_sink",
    ) -> None:  # fmt: skip
        self.bootstrap, self.dsn = bootstrap, dsn
        self.table = f"t_{os.urandom(5).hex()}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(ddl.format(table=self.table))
        extra = (dsn, self.table, key, batch) if "orders" in factory else (dsn, self.table, batch)
        self.unique = UniqueJob(bootstrap, tmp, factory, "sink", *extra)
        self.pipeline, self.prefix = self.unique.pipeline, self.unique.prefix
        self.input = f"{self.prefix}orders"
        self.group = f"{self.pipeline.name}.db"
        self.sent = 0

    def job(self, instance: str = "a", **kwargs) -> Job:
        return self.unique.job(f"state-{instance}", **kwargs)

    def send(self, n: int, *, bad: dict | None = None) -> None:
        """`n` orders with ids order-<i> (amount i % 100), over both partitions by key."""
        rows = [
            (f"c{i % 13}", {"order_id": f"order-{i}", "amount": i % 100, "customer": f"c{i % 13}"},
             None)
            for i in range(self.sent, self.sent + n)
        ]  # fmt: skip
        if bad is not None:
            rows.insert(len(rows) // 2, ("c0", bad, None))
        self.sent += n
        produce(self.bootstrap, self.input, rows)

    def query(self, statement: str, *args) -> list[tuple]:
        with psycopg.connect(self.dsn) as conn:
            return conn.execute(statement.format(table=self.table), args).fetchall()

    def count(self) -> int:
        return self.query("SELECT count(*) FROM {table}")[0][0]

    def wait_rows(self, n: int, timeout: float = 120) -> None:
        wait_for(lambda: self.count() >= n, timeout, what=f"{n} rows in {self.table}")

    def check_exactly_once(self, expected: int) -> None:
        """Every order once: as many rows as distinct ids as orders sent, the offsets table at
        the input's end."""
        count, distinct, orders = self.query(
            "SELECT count(*), count(DISTINCT logwheel_id), count(DISTINCT order_id) FROM {table}"
        )[0]
        assert (count, distinct, orders) == (expected, expected, expected), (
            f"rows {count}, distinct ids {distinct}, distinct orders {orders}; sent {expected}"
        )

    def offsets(self) -> dict[int, int]:
        rows = self.query(
            "SELECT partition, next_offset FROM logwheel_sink_offsets"
            " WHERE sink = %s AND topic = %s",
            "db",  # the sink's name as declared
            self.input,
        )
        return dict(rows)

    def dead_letters(self, expect: int, timeout: float = 30) -> list:
        return read_topic(
            self.bootstrap, f"{self.group}.dlq", expect=expect, timeout=timeout, to_end=True
        )


def wait_stopped(job: Job, timeout: float = 60) -> None:
    """Until the job's process stopped itself (SIGSTOP at its stop point: state T)."""

    def stopped() -> bool:
        assert job.alive(), job.output()[-3000:]
        with open(f"/proc/{job.proc.pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t")

    wait_for(stopped, timeout, interval=0.05, what="the job to stop at its stop point")


def kill_stopped(job: Job) -> None:
    """SIGKILL a stopped job (a stopped process dies of SIGKILL at once)."""
    job.signal(signal.SIGKILL)
    job.proc.wait(30)


def send_raw(bootstrap: str, topic: str, value: bytes) -> None:
    """One record whose value is `value` as it is (not JSON, say), keyed c0."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, b"c0")
    producer.flush(30)
