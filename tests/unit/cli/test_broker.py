"""`logwheel broker`: what each action prints and exits with, on homes that hold nothing, a
single broker or a cluster. The broker's and cluster's own work is stubbed where it would
start a JVM (tests/integration/test_broker.py and test_cluster.py run the real ones)."""

from __future__ import annotations

import json

import pytest

from framework.broker.cluster import Cluster, NodeState
from framework.broker.embedded import Broker
from framework.cli.broker import NOT_RUNNING
from framework.cli.main import main
from framework.jvm.service import Started


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "broker"
    monkeypatch.setenv("LOGWHEEL_BROKER_DIR", str(home))
    return home


@pytest.fixture
def cluster_home(home):
    home.mkdir()
    (home / "cluster.json").write_text(json.dumps({"nodes": 3}))
    return home


def _lines(capsys) -> tuple[list[str], str]:
    out = capsys.readouterr()
    return out.out.splitlines(), out.err


def test_status_of_a_broker_never_started_exits_3_and_stop_says_it_was_not_running(home, capsys):
    assert main(["broker", "status"]) == NOT_RUNNING
    assert _lines(capsys)[0] == [f"broker not running ({home.resolve()})"]
    assert main(["broker", "stop"]) == 0
    assert _lines(capsys)[0] == [f"broker was not running ({home.resolve()})"]


def test_a_start_prints_the_bootstrap_address_alone_on_its_last_line(home, capsys, monkeypatch):
    address = "127.0.0.1:4242"
    results = iter([Started(address, True, 3.21, 77), Started(address, False, 0.4, 77)])
    monkeypatch.setattr(Broker, "start", lambda self, timeout: next(results))
    assert main(["broker", "start"]) == 0
    assert _lines(capsys)[0] == ["broker ready in 3.2s (pid 77)", "127.0.0.1:4242"]
    assert main(["broker", "start"]) == 0
    lines = _lines(capsys)[0]
    assert lines == ["broker already running (pid 77), answered in 0.4s", "127.0.0.1:4242"]


def test_node_actions_on_a_single_broker_fail_in_one_line(home, capsys):
    for action in ("kill", "stop", "start"):
        assert main(["broker", action, "--node", "2"]) == 1
        error = f"logwheel: --node: {home.resolve()} holds a single broker, not a cluster\n"
        assert _lines(capsys)[1] == error


def test_a_cluster_is_plain_with_its_controllers_in_its_nodes(home, capsys):
    for flag in ("--secure", "--separate-controller"):
        assert main(["broker", "start", "--nodes", "3", flag]) == 1
        assert "--nodes: a cluster is plain" in _lines(capsys)[1]


def test_kill_needs_a_node(cluster_home, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["broker", "kill"])
    assert exit.value.code == 2 and "--node" in _lines(capsys)[1]


def test_a_node_outside_the_cluster_is_refused(cluster_home, capsys):
    assert main(["broker", "kill", "--node", "4"]) == 1
    assert "--node 4: the cluster's nodes are 1 to 3" in _lines(capsys)[1]


def _cluster_state(monkeypatch, pids: dict[int, int | None], under: int = 0) -> None:
    states = [NodeState(i, pid, f"127.0.0.1:{100 + i}", 4 * bool(pid)) for i, pid in pids.items()]
    monkeypatch.setattr(Cluster, "pids", lambda self: pids)
    monkeypatch.setattr(Cluster, "nodes_state", lambda self: states)
    monkeypatch.setattr(Cluster, "controller", lambda self: 1)
    rows = [(f"t{i}", 0, [1, 2, 3], [1, 3]) for i in range(under)]
    monkeypatch.setattr(Cluster, "under_replicated", lambda self: rows)
    monkeypatch.setattr(Cluster, "bootstrap", lambda self: "127.0.0.1:101,127.0.0.1:102")


def test_a_cluster_status_describes_each_node_and_the_partitions_missing_a_replica(
    cluster_home, capsys, monkeypatch
):
    _cluster_state(monkeypatch, {1: 11, 2: None, 3: 33}, under=22)
    assert main(["broker", "status"]) == 0
    lines = _lines(capsys)[0]
    assert lines[:5] == [
        f"cluster of 3 nodes, 2 running (data in {cluster_home.resolve()})",
        "node 1 at 127.0.0.1:101: running (pid 11), leads 4 partitions",
        "node 2 at 127.0.0.1:102: down",
        "node 3 at 127.0.0.1:103: running (pid 33), leads 4 partitions",
        "active controller: node 1",
    ]
    assert lines[5] == "under-replicated partitions: 22"
    assert lines[6] == "  t0-0: replicas [1, 2, 3], in sync [1, 3]"
    assert len(lines) == 6 + 20 + 1 and lines[-1] == "  ... and 2 more"


def test_a_cluster_with_every_node_down_is_not_running(cluster_home, capsys, monkeypatch):
    _cluster_state(monkeypatch, {1: None, 2: None, 3: None})
    assert main(["broker", "status"]) == NOT_RUNNING


def test_a_cluster_start_ends_with_its_bootstrap_address(cluster_home, capsys, monkeypatch):
    _cluster_state(monkeypatch, {1: 11, 2: 22, 3: 33})
    started = []

    def start(self, node, timeout):
        started.append(node)
        return Started("127.0.0.1:101,127.0.0.1:102", True, 1.0, 11)

    monkeypatch.setattr(Cluster, "start", start)
    assert main(["broker", "start", "--node", "2"]) == 0
    assert started == [2]
    assert _lines(capsys)[0][-1] == "127.0.0.1:101,127.0.0.1:102"


def test_stopping_a_cluster_says_what_each_node_was(cluster_home, capsys, monkeypatch):
    monkeypatch.setattr(Cluster, "stop", lambda self, node, timeout: {1: 11, 2: None, 3: 33})
    assert main(["broker", "stop"]) == 0
    assert _lines(capsys)[0] == [
        "node 1 stopped (pid 11)",
        "node 2 was not running",
        "node 3 stopped (pid 33)",
    ]
