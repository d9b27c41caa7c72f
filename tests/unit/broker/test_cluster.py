"""The cluster's decisions that need no JVM: settings, each node's properties, ports, homes."""

from __future__ import annotations

import json

import pytest

from framework.broker.bootstrap import open_home
from framework.broker.cluster import Cluster, cluster_settings, cluster_size
from framework.broker.roles import cluster_node
from framework.broker.settings import BrokerError


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("LOGWHEEL_BROKER_PORT", raising=False)
    return tmp_path / "cluster"


def test_three_nodes_replicate_everything_three_times_with_two_in_sync():
    settings = cluster_settings(3)
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "default.replication.factor",
    ):
        assert settings[key] == "3"
    assert settings["min.insync.replicas"] == settings["transaction.state.log.min.isr"] == "2"
    assert settings["controlled.shutdown.enable"] == "true"
    assert cluster_settings(5)["default.replication.factor"] == "3"
    assert cluster_settings(2)["min.insync.replicas"] == "2"


def test_each_node_names_every_voter_and_advertises_its_proxy_to_clients_only(tmp_path):
    ports = {i: {"port": 100 + i, "internal": 200 + i, "controller": 300 + i} for i in (1, 2, 3)}
    node = cluster_node(2, ports, 9999, tmp_path)
    assert node["node.id"] == "2"
    assert node["controller.quorum.voters"] == ("1@127.0.0.1:301,2@127.0.0.1:302,3@127.0.0.1:303")
    assert node["advertised.listeners"] == ("PLAINTEXT://127.0.0.1:9999,INTERNAL://127.0.0.1:202")
    assert "PLAINTEXT://127.0.0.1:102" in node["listeners"]
    assert node["inter.broker.listener.name"] == "INTERNAL"


def test_ports_are_distinct_saved_and_kept_and_proxies_advertised(home):
    cluster = Cluster(home, 3, advertised_ports={2: 4242})
    ports = cluster._choose_ports(running=[])
    numbers = [p for node in ports.values() for k, p in node.items() if k != "advertised"]
    assert len(set(numbers)) == 9
    assert ports[2]["advertised"] == 4242 and ports[1]["advertised"] == ports[1]["port"]
    assert Cluster(home, 3)._choose_ports(running=[]) == ports
    assert Cluster(home, 3).bootstrap().split(",")[1] == "127.0.0.1:4242"


def test_a_cluster_port_range_follows_logwheel_broker_port(home, monkeypatch):
    from framework.jvm.process import any_free_port

    base = any_free_port()
    monkeypatch.setenv("LOGWHEEL_BROKER_PORT", str(base))
    ports = Cluster(home, 2)._choose_ports(running=[])
    assert [ports[1]["port"], ports[2]["port"]] == [base, base + 1]


def test_a_home_keeps_its_size_and_its_kind(home, tmp_path):
    home.mkdir()
    (home / "cluster.json").write_text(json.dumps({"nodes": 3}))
    assert cluster_size(home) == 3 and isinstance(open_home(home), Cluster)
    with pytest.raises(BrokerError, match="holds a cluster of 3 nodes"):
        Cluster(home, 5)
    with pytest.raises(BrokerError, match="2 to 5 nodes"):
        Cluster(tmp_path / "other", 9)
    with pytest.raises(BrokerError, match="holds no cluster"):
        Cluster(tmp_path / "other")
    single = tmp_path / "single"
    (single / "data").mkdir(parents=True)
    (single / "data" / "meta.properties").write_text("cluster.id=x\n")
    with pytest.raises(BrokerError, match="holds a single broker"):
        Cluster(single, 3).start(say=lambda _: None)
    assert not isinstance(open_home(single), Cluster)


def test_a_node_outside_the_cluster_is_refused_in_one_line(home):
    with pytest.raises(BrokerError, match="--node 4: the cluster's nodes are 1 to 3"):
        Cluster(home, 3).kill(4)
