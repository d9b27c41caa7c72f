"""Exactly-once into PostgreSQL under crashes, a zombie and a database outage, against a real
broker and a real PostgreSQL under `logwheel run`: every order written once (`count =
count(distinct id)`), the refused row dead-lettered with the database's words, upserted values
final, the password never printed, the sink in `logwheel status` and `logwheel graph`.

A crash lands at a named step of a batch (framework/sinks/stops.py): the job stops itself
there (`LOGWHEEL_SINK_STOP_AT`), and the test SIGKILLs it — before the database transaction,
inside it (the rows sent, not committed) and between its commit and anything after it.
Reduced inside `make test`; `make chaos` (LOGWHEEL_CHAOS_FULL=1) runs more records and every
step at three batches.
"""

from __future__ import annotations

import json
import os
import random
import signal

import pytest

from framework.ops.status import graph, status
from tests.support import produce, read_topic, wait_for
from tests.support_postgres import PASSWORD, private_postgres, wait_ready
from tests.support_sink import TOTALS_TABLE, OrdersSink, kill_stopped, send_raw, wait_stopped

FULL = os.environ.get("LOGWHEEL_CHAOS_FULL") == "1"
ORDERS = 5_000 if FULL else 400
AMOUNTS = 5_000 if FULL else 600
KILLS = 4 if FULL else 1
BATCH = 50 if FULL else 20
STEPS = ("before-transaction", "in-transaction", "after-commit")
AT_BATCHES = (2, 5, 9) if FULL else (2,)

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1200 if FULL else 300)]


def test_sigkill_at_each_step_of_a_batch_and_a_database_outage_lose_and_repeat_no_row(
    kafka, tmp_path
):
    """SIGKILL at each step; then, running clean, the database stopped and started again
    under it (a server of the test's own: the shared one serves other tests meanwhile); a
    row the database refuses and a record that cannot be decoded are dead-lettered."""
    with private_postgres() as server:
        case = OrdersSink(kafka, tmp_path, server.dsn(), batch=BATCH)
        case.send(ORDERS, bad={"order_id": "refused", "amount": -1, "customer": "c0"})
        send_raw(kafka, case.input, b"{not json")
        for nth in AT_BATCHES:
            for step in STEPS:
                job = case.job(env={"LOGWHEEL_SINK_STOP_AT": f"{step}:{nth}"}).start()
                wait_stopped(job)
                kill_stopped(job)
                case.send(BATCH // 2)  # more input between the kills
        job = case.job().start()
        try:
            case.wait_rows(case.sent)
            server.stop(mode="fast")
            case.send(ORDERS // 4)
            wait_for(lambda: "holding" in job.output(this_start=True), 60, what="a hold")
            assert job.alive()
            server.start()
            wait_ready(server)
            case.wait_rows(case.sent)
            letters = case.dead_letters(2)
            rows = {r.computation: r for r in status(case.pipeline, kafka)}
            assert rows["db"].owner and rows["db"].last_commit
        finally:
            assert job.stop() == 0, job.output()[-3000:]
        case.check_exactly_once(case.sent)
        assert sum(case.offsets().values()) == case.sent + 2  # every record passed, once
        stages = {dict(m.headers())["logwheel.error.stage"].decode(): m for m in letters}
        refused = dict(stages["write"].headers())["logwheel.error"].decode()
        assert "CheckViolation" in refused and "violates check constraint" in refused
        assert json.loads(stages["write"].value())["order_id"] == "refused"
        assert stages["decode"].value() == b"{not json"
        assert '"k:db"' in graph(case.pipeline)
        assert PASSWORD not in job.output() and "***" in job.output()


def test_a_zombie_cannot_commit(kafka, postgres, tmp_path):
    """A stops itself holding a batch of both partitions; B takes them over once A's session
    times out and writes everything; A, continued, is fenced by the epoch: nothing it held
    is written twice."""
    case = OrdersSink(kafka, tmp_path, postgres.dsn(), batch=BATCH)
    case.send(ORDERS)
    config = tmp_path / "session.toml"  # the broker's least: the test waits out a session
    config.write_text('[kafka]\n"session.timeout.ms" = 6000\n')
    stop_at = {"LOGWHEEL_SINK_STOP_AT": "before-transaction:3"}
    zombie = case.job("a", env=stop_at, config=config).start()
    wait_stopped(zombie)
    written = case.count()
    successor = case.job("b", config=config).start()
    try:
        case.wait_rows(case.sent, timeout=120)
        assert case.count() > written  # B wrote what A held
        zombie.signal(signal.SIGCONT)
        wait_for(
            lambda: "fenced" in zombie.output() or case.count() > case.sent,
            60,
            what="the zombie to be fenced (or to write its batch again)",
        )
        case.check_exactly_once(case.sent)
        case.send(BATCH)  # and both go on
        case.wait_rows(case.sent)
        case.check_exactly_once(case.sent)
    finally:
        for job in (zombie, successor):
            job.stop()


def test_an_upsert_sink_fed_by_a_computation_under_sigkill_ends_at_the_changelog(
    kafka, postgres, tmp_path
):
    """The computation runs on in a process of its own while its sink is SIGKILLed inside
    a transaction, at a different batch each time, as updates of the same keys flow."""
    case = OrdersSink(
        kafka, tmp_path, postgres.dsn(), batch=BATCH, ddl=TOTALS_TABLE,
        factory="tests.integration.sink_job:totals_sink",
    )  # fmt: skip
    amounts = f"{case.prefix}amounts"
    rng = random.Random(11)
    truth: dict[str, int] = {}
    batches = [
        [(f"k{rng.randrange(30)}", rng.randrange(1, 100)) for _ in range(50)]
        for _ in range(AMOUNTS // 50)
    ]
    computation = case.job("c", computations=["totals"]).start()
    sink = None
    try:
        for n, batch in enumerate(batches):
            for key, amount in batch:
                truth[key] = truth.get(key, 0) + amount
            produce(kafka, amounts, [(k, {"amount": a}, None) for k, a in batch])
            if n % (len(batches) // KILLS) == 0:  # a sink that dies at its next batch
                if sink is not None:
                    wait_stopped(sink)
                    kill_stopped(sink)
                stop_at = {"LOGWHEEL_SINK_STOP_AT": f"in-transaction:{rng.randint(1, 3)}"}
                sink = case.job("s", computations=["db"], env=stop_at).start()
        wait_stopped(sink)
        kill_stopped(sink)
        sink = case.job("s", computations=["db"]).start()
        wait_for(
            lambda: dict(case.query("SELECT key, total FROM {table}")) == truth,
            120,
            what="the table's totals to reach the input's",
        )
    finally:
        for job in (computation, sink):
            if job is not None:
                job.stop()
    changelog = _latest(kafka, f"{case.pipeline.name}.totals.changelog")
    rows = {k: (t, n) for k, t, n in case.query("SELECT key, total, n FROM {table}")}
    assert rows == {k: (v["total"], v["n"]) for k, v in changelog.items()}


def _latest(bootstrap: str, topic: str) -> dict:
    import json

    latest = {}
    for msg in read_topic(bootstrap, topic, to_end=True):
        latest[msg.key().decode()] = None if msg.value() is None else json.loads(msg.value())
    return {k: v for k, v in latest.items() if v is not None}
