"""The PostgreSQL sink under `logwheel run` against a real broker and a real PostgreSQL: rows
written once each, a row the database refuses and an undecodable record dead-lettered with
the reason, the offsets table where the input ends, the password never printed, the sink in
`logwheel status` and `logwheel graph`."""

from __future__ import annotations

import json

import pytest

from framework.ops.status import graph, status
from tests.support_postgres import PASSWORD
from tests.support_sink import OrdersSink

pytestmark = pytest.mark.timeout(300)


def test_rows_are_written_once_and_refused_ones_dead_lettered(kafka, postgres, tmp_path):
    case = OrdersSink(kafka, tmp_path, postgres.dsn(), batch=50)
    case.send(300, bad={"order_id": "refused", "amount": -5, "customer": "c0"})
    from tests.support import produce  # an undecodable value: not JSON

    produce(kafka, case.input, [])
    _send_raw(kafka, case.input, b"{not json")
    job = case.job().start()
    try:
        case.wait_rows(300)
        case.send(100)
        case.wait_rows(400)
        letters = case.dead_letters(2)
        case.check_exactly_once(400)
        assert sum(case.offsets().values()) == 402  # every record of the input passed
        stages = {dict(m.headers())["logwheel.error.stage"].decode(): m for m in letters}
        refused = dict(stages["sink"].headers())
        assert b"CheckViolation" in refused["logwheel.error"], refused
        assert b"violates check constraint" in refused["logwheel.error"], refused
        assert json.loads(stages["sink"].value())["order_id"] == "refused"
        assert stages["decode"].value() == b"{not json"
        rows = {r.computation: r for r in status(case.pipeline, kafka)}
        assert rows["db"].consumer_lag == 0 and rows["db"].owner
        assert '"k:db"' in graph(case.pipeline)
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    assert PASSWORD not in job.output()
    assert "assigned" in job.output()


def _send_raw(bootstrap: str, topic: str, value: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, b"c0")
    producer.flush(30)
