"""Which address a command connects to: `--bootstrap`, else `LOGWHEEL_BOOTSTRAP`, else the
embedded broker or cluster of `LOGWHEEL_BROKER_DIR`, started if needed."""

from __future__ import annotations

import json

from framework.broker import bootstrap
from framework.broker.cluster import Cluster
from framework.broker.embedded import Broker
from framework.jvm.service import Started


def test_the_flag_wins_then_the_environment_then_the_embedded_broker(monkeypatch):
    monkeypatch.setenv("LOGWHEEL_BOOTSTRAP", "env:9092")
    monkeypatch.setattr(bootstrap, "ensure_running", lambda: "embedded:1")
    assert bootstrap.bootstrap_from("flag:9092") == "flag:9092"
    assert bootstrap.bootstrap_from(None) == "env:9092"
    monkeypatch.delenv("LOGWHEEL_BOOTSTRAP")
    assert bootstrap.bootstrap_from(None) == "embedded:1"


def test_a_home_opens_as_the_cluster_it_holds_else_as_a_single_broker(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGWHEEL_BROKER_DIR", str(tmp_path / "single"))
    assert type(bootstrap.open_home()) is Broker
    assert bootstrap.open_home().home == (tmp_path / "single").resolve()
    (tmp_path / "three").mkdir()
    (tmp_path / "three" / "cluster.json").write_text(json.dumps({"nodes": 3}))
    cluster = bootstrap.open_home(tmp_path / "three")
    assert isinstance(cluster, Cluster) and cluster.size == 3


def test_the_embedded_broker_is_started_if_need_be_and_its_address_returned(tmp_path, monkeypatch):
    calls = []

    def start(broker, say):
        calls.append((broker.home, say))
        return Started("127.0.0.1:4242", False, 0.1, 7)

    monkeypatch.setattr(Broker, "start", start)
    assert bootstrap.ensure_running(tmp_path) == "127.0.0.1:4242"
    assert calls == [(tmp_path.resolve(), bootstrap.say_to_stderr)]
