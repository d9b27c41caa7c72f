"""`StateClient` (framework/query/client.py) over stand-ins of the routes and the peers: the owner
asked first, a standby only when a lag is allowed, a refusal no retry can mend failing at once,
and while no instance can answer, the routes looked up afresh and asked again with a growing
pause until the deadline, then `StateUnavailable` with the last reason. The routes themselves
are tested in test_routing.py, the endpoint in test_server.py."""

from __future__ import annotations

import json

import pytest

from framework import Computation, Pipeline, key_by
from framework.core.pipeline import PipelineError
from framework.errors import ConfigurationError
from framework.kafka.errors import Unreachable
from framework.query import client as client_module
from framework.query.client import StateClient, StateUnavailable
from framework.query.connections import HOP_HEADER, PeerUnreachable, Reply
from framework.query.routing import Placement, Replica

OWNER = Replica("a", "http://10.0.0.1:81", True)
STANDBY = Replica("b", "http://10.0.0.2:81", False)
ANSWER = {"key": "ann", "value": {"n": 3}, "partition": 2, "instance": "a",
          "served_by": "active", "lag": 0}  # fmt: skip


class Count(Computation):
    def process_record(self, ctx, record):
        pass


class Clock:
    """The client's `time`: monotonic seconds that only its pauses move."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Cluster:
    """What the client meets: each round's placement (or error), and each peer's reply."""

    def __init__(self, rounds: list, peers: dict) -> None:
        self.rounds, self.peers = rounds, peers
        self.asked: list[tuple[str, str, dict]] = []
        self.forgotten = 0

    def place(self, computation, key):
        placed = self.rounds[0] if len(self.rounds) == 1 else self.rounds.pop(0)
        if isinstance(placed, Exception):
            raise placed
        return placed

    def forget(self, computation):
        self.forgotten += 1

    def get(self, url, path, headers=None):
        self.asked.append((url, path, headers))
        reply = self.peers[url]
        if isinstance(reply, Exception):
            raise reply
        status, body = reply
        return Reply(status, {}, body if isinstance(body, bytes) else json.dumps(body).encode())


def client(monkeypatch, rounds, peers, pipeline="shop", deadline_s=30.0):
    made = StateClient(pipeline, bootstrap="127.0.0.1:1", deadline_s=deadline_s)
    cluster, clock = Cluster(rounds, peers), Clock()
    monkeypatch.setattr(made.router, "place", cluster.place)
    monkeypatch.setattr(made.router, "forget", cluster.forget)
    monkeypatch.setattr(made.connections, "get", cluster.get)
    monkeypatch.setattr(client_module, "time", clock)
    return made, cluster, clock


def test_the_owner_answers_for_the_key_without_a_second_hop(monkeypatch):
    placed = Placement(2, (OWNER, STANDBY))
    c, cluster, _ = client(monkeypatch, [placed], {OWNER.url: (200, ANSWER)})
    assert c.query("count", "a/b") == ANSWER
    assert c.get("count", "a/b") == {"n": 3}
    assert cluster.asked[0] == (OWNER.url, "/state/count/a%2Fb", {HOP_HEADER: "1"})
    assert {url for url, _, _ in cluster.asked} == {OWNER.url}


def test_a_standby_is_asked_only_when_a_lag_is_allowed(monkeypatch):
    placed = Placement(2, (OWNER, STANDBY))
    peers = {OWNER.url: PeerUnreachable("refused"), STANDBY.url: (200, ANSWER)}
    c, cluster, _ = client(monkeypatch, [placed], peers, deadline_s=1)
    with pytest.raises(StateUnavailable, match=r"a at http://10.0.0.1:81: refused"):
        c.query("count", "ann")
    assert {url for url, _, _ in cluster.asked} == {OWNER.url}
    assert c.query("count", "ann", max_lag=5) == ANSWER
    assert cluster.asked[-1][:2] == (STANDBY.url, "/state/count/ann?max_lag=5")


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_refusal_no_retry_can_mend_fails_at_once_with_the_peers_reason(monkeypatch, status):
    placed = Placement(2, (OWNER,))
    c, cluster, clock = client(monkeypatch, [placed], {OWNER.url: (status, {"error": "nope"})})
    with pytest.raises(ConfigurationError, match=r"^http://10.0.0.1:81/state/count/ann: nope$"):
        c.query("count", "ann")
    assert len(cluster.asked) == 1 and clock.sleeps == []


def test_until_an_instance_answers_the_routes_are_looked_up_afresh_after_a_growing_pause(
    monkeypatch,
):
    rounds = [
        Placement(2, ()),  # rebalancing
        Unreachable("no broker"),
        Placement(2, (OWNER,)),  # restoring: 503
        Placement(2, (STANDBY, OWNER)),
    ]
    peers = {OWNER.url: (503, {"error": "restoring"}), STANDBY.url: (200, ANSWER)}
    c, cluster, clock = client(monkeypatch, rounds, peers)
    assert c.query("count", "ann", max_lag=0) == ANSWER
    assert clock.sleeps == [0.05, 0.1, 0.2]
    assert cluster.forgotten == 3


def test_past_its_deadline_it_gives_up_with_the_last_reason_the_pause_capped_at_a_second(
    monkeypatch,
):
    placed = Placement(2, (OWNER,))
    c, _, clock = client(monkeypatch, [placed], {OWNER.url: (503, b"<html>busy")}, deadline_s=3)
    gave_up = r"^no answer for 'ann' of count in 3 s: a: 503 <html>busy$"
    with pytest.raises(StateUnavailable, match=gave_up):
        c.query("count", "ann")
    assert clock.sleeps == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]


def test_no_replica_at_all_is_said_to_be_a_rebalance(monkeypatch):
    c, _, _ = client(monkeypatch, [Placement(3, ())], {}, deadline_s=0.01)
    with pytest.raises(StateUnavailable, match=r"no instance holds partition 3 now \(rebalancing"):
        c.query("count", "ann")


def test_a_partition_only_standbys_hold_is_named_when_no_lag_is_allowed(monkeypatch):
    c, cluster, _ = client(monkeypatch, [Placement(3, (STANDBY,))], {}, deadline_s=0.01)
    with pytest.raises(StateUnavailable, match=r"no instance owns partition 3 now \(rebalancing"):
        c.query("count", "ann")
    assert cluster.asked == []


def test_given_the_pipeline_an_unknown_computation_is_refused_before_any_question(monkeypatch):
    pipeline = Pipeline("shop")
    pipeline.source("clicks")
    pipeline.computation("count", Count, inputs={"clicks": key_by("user")})
    c, cluster, _ = client(monkeypatch, [Placement(0, ())], {}, pipeline=pipeline)
    with pytest.raises(PipelineError, match=r"has no computation 'cuont'; it has \['count'\]"):
        c.query("cuont", "ann")
    assert cluster.asked == [] and cluster.forgotten == 0


def test_the_kafka_and_serve_tables_come_from_a_mapping_or_a_config_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SASL_SECRET", "s3cret")
    tables = {"kafka": {"sasl.password": "${SASL_SECRET}"}, "serve": {"token": "t" * 16}}
    c = StateClient("shop", bootstrap="127.0.0.1:1", config=tables)
    assert c.router.kafka == {"sasl.password": "s3cret"}
    assert c.connections.settings.headers() == {"Authorization": f"Bearer {'t' * 16}"}
    config = tmp_path / "c.toml"
    config.write_text(
        '[kafka]\n"security.protocol" = "SSL"\n[serve]\ntoken = "${SASL_SECRET}-0123456789"\n'
    )
    c = StateClient("shop", bootstrap="127.0.0.1:1", config=config)
    assert c.router.kafka == {"security.protocol": "SSL"}
    assert c.connections.settings.token == "s3cret-0123456789"


def test_a_config_file_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    missing = tmp_path / "missing.toml"
    with pytest.raises(ConfigurationError, match=rf"^--config {missing}: .*No such file"):
        StateClient("shop", bootstrap="127.0.0.1:1", config=missing)
    broken = tmp_path / "broken.toml"
    broken.write_text("[kafka\n")
    with pytest.raises(ConfigurationError, match=rf"^--config {broken}: "):
        StateClient("shop", bootstrap="127.0.0.1:1", config=str(broken))
