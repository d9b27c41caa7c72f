"""The embedded broker's decisions that need no JVM: ports, config, environment checks."""

import json
import os
import re
import signal
import socket
import sys
from pathlib import Path

import pytest

from framework.broker import settings as broker_settings
from framework.broker.cluster import Cluster
from framework.broker.embedded import Broker
from framework.broker.settings import BrokerError
from framework.jvm import process
from framework.jvm.service import Service
from tests.support_impostor import impostor


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("LOGWHEEL_BROKER_PORT", raising=False)
    return tmp_path / "broker"


@pytest.fixture
def taken_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def children():
    """Pids of session leaders to SIGKILL at the end, whatever the test did to them."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if process.alive(pid):
            os.killpg(pid, signal.SIGKILL)
            process.wait_exit(pid, 60)


def _choose(home, wanted=None):
    broker = Broker(home)
    broker.home.mkdir(parents=True, exist_ok=True)
    return broker._choose_ports(wanted)


def test_ports_are_persisted_and_reused(home):
    first = _choose(home, 0)
    assert json.loads((home / "ports.json").read_text()) == first
    assert _choose(home) == first
    assert _choose(home, 0) == first
    assert first["port"] != first["controller_port"]


def test_env_port_is_used(home, monkeypatch):
    free = process.any_free_port()
    monkeypatch.setenv("LOGWHEEL_BROKER_PORT", str(free))
    assert _choose(home)["port"] == free


def test_a_taken_port_that_was_asked_for_fails_with_the_fix(home, taken_port):
    with pytest.raises(BrokerError, match="taken by another program.*LOGWHEEL_BROKER_PORT"):
        _choose(home, taken_port)


def test_a_taken_saved_port_fails_but_test_brokers_move_on(home, taken_port):
    home.mkdir(parents=True)
    (home / "ports.json").write_text(json.dumps({"port": taken_port, "controller_port": 1}))
    with pytest.raises(BrokerError, match="saved in"):
        _choose(home)
    assert _choose(home, 0)["port"] != taken_port


def test_bad_env_port_is_named(home, monkeypatch):
    monkeypatch.setenv("LOGWHEEL_BROKER_PORT", "nine")
    with pytest.raises(BrokerError, match="LOGWHEEL_BROKER_PORT"):
        _choose(home)


def test_config_is_kraft_single_node_on_loopback(home):
    broker = Broker(home)
    broker.home.mkdir(parents=True)
    broker._write_config({"port": 19092, "controller_port": 19093})
    lines = broker.config_file.read_text().splitlines()
    config = dict(line.split("=", 1) for line in lines if "=" in line)
    assert config["process.roles"] == "broker,controller"
    assert config["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert config["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert config["auto.create.topics.enable"] == "false"
    assert config["transaction.state.log.min.isr"] == "1"
    assert config["log.dirs"] == str(broker.data_dir)


def _properties(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_a_separated_broker_and_its_controller_are_two_nodes_of_one_quorum(home):
    broker = Broker(home, separate_controller=True, settings={"broker.session.timeout.ms": "2000"})
    broker.home.mkdir(parents=True)
    broker._write_config({"port": 19092, "controller_port": 19093})
    node, controller = _properties(broker.config_file), _properties(broker.controller.config_file)
    assert (node["process.roles"], controller["process.roles"]) == ("broker", "controller")
    assert node["node.id"] != controller["node.id"]
    voters = f"{controller['node.id']}@127.0.0.1:19093"
    assert node["controller.quorum.voters"] == controller["controller.quorum.voters"] == voters
    assert node["listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert controller["listeners"] == "CONTROLLER://127.0.0.1:19093"
    assert controller["log.dirs"] == str(broker.controller.data_dir) != node["log.dirs"]
    # the controller fences brokers and sets new topics' defaults; the broker runs the rest
    assert controller["broker.session.timeout.ms"] == "2000"
    assert controller["num.partitions"] == "4" and "num.partitions" not in node
    assert node["transaction.abort.timed.out.transaction.cleanup.interval.ms"] == "10000"


def test_a_home_keeps_its_mode(home):
    """Node ids and metadata logs differ between the modes: a combined home is refused as a
    separated one, a separated home stays separated, and a secure broker is combined only."""
    combined = Broker(home)
    combined.data_dir.mkdir(parents=True)
    (combined.data_dir / "meta.properties").write_text("cluster.id=x\nnode.id=1\n")
    with pytest.raises(BrokerError, match="holds a combined broker"):
        Broker(home, separate_controller=True).start(port=0, say=lambda _: None)
    separated = Broker(home.with_name("separated"))
    separated.controller.data_dir.mkdir(parents=True)
    (separated.controller.data_dir / "meta.properties").write_text("cluster.id=y\n")
    assert Broker(separated.home).separate and not Broker(home).separate
    assert Broker(separated.home).controller.cluster_id() == "y"
    secure = Broker(home.with_name("secure"), secure=True, separate_controller=True)
    with pytest.raises(BrokerError, match="secure broker runs as one combined node"):
        secure.start(port=0, say=lambda _: None)


def test_compose_broker_has_the_single_node_settings():
    """docker-compose.yml's broker runs the settings the embedded one does, among them the
    timed-out-transaction scan that keeps transaction markers from being skipped after a
    restart (`framework.broker.settings.TIMED_OUT_ABORT_SCAN_MS`)."""
    compose = (Path(broker_settings.__file__).parents[2] / "docker-compose.yml").read_text()
    env = dict(re.findall(r"^\s+(KAFKA_[A-Z0-9_]+): \"?([^\"\n]*)\"?$", compose, re.M))
    for key, value in broker_settings.SINGLE_NODE_SETTINGS.items():
        assert env.get("KAFKA_" + key.upper().replace(".", "_")) == value, key


def test_a_live_pid_of_another_program_is_not_ours(home):
    """This very test process stands in for a program that took the pid of a dead broker: the
    pid file is stale, and stop never signals it (or the test would die)."""
    broker = Broker(home)
    broker.home.mkdir(parents=True)
    broker.pid_file.write_text(f"{os.getpid()}\n")
    said = []
    assert broker.running_pid(said.append) is None
    assert "another program" in said[0]
    assert broker.stop() is None  # and stop never signals it


def test_another_program_on_its_port_is_not_taken_for_the_running_broker(home, children):
    """The broker's process runs (a sleeper with its command line stands in for the JVM) but
    another program listens on its saved port: that is not the broker. The status does not
    give its address; a start fails in one line naming it and stops the broker's process, and
    never signals that program."""
    broker = Broker(home)
    broker.home.mkdir(parents=True)
    port = process.any_free_port()
    broker.ports_file.write_text(json.dumps({"port": port, "controller_port": port + 1}))
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    pid = broker.jvm.spawn([*sleeper, "kafka.Kafka", str(broker.config_file)])
    children.append(pid)
    with impostor(port) as other:
        assert broker.running_pid() == pid and process.accepts(port)
        assert broker.status() is None
        rule = rf"127\.0\.0\.1:{port} is held by another program \(pid {other}\), not "
        rule += rf"the broker \(pid {pid}\): stop that program, then start the broker again"
        with pytest.raises(BrokerError, match=f"^{rule}$"):
            broker.start(timeout=60, say=lambda _: None)
        assert process.wait_exit(pid, 60) and process.alive(other)
        assert broker.running_pid() is None


def test_a_separated_brokers_stop_ends_its_jvm_before_the_controller_can_fence_it(
    home, monkeypatch
):
    """Its SIGTERM is followed by a SIGKILL before its session, less a heartbeat, can expire
    (`Fencing.stop_timeout`); a combined node takes its controller with it and keeps the whole
    timeout. Either records when it went down: the next start's wait counts from then."""
    fast = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "500"}
    separated = Broker(home, separate_controller=True, settings=fast)
    combined = Broker(home.with_name("combined"), settings=fast)
    separated.home.mkdir(parents=True)
    combined.home.mkdir(parents=True)
    signalled = []

    def stop(service, timeout):
        signalled.append((service.name, timeout))
        return 4242

    monkeypatch.setattr(Service, "stop", stop)
    separated.stop(keep_controller=True)
    assert signalled == [("the broker", 1.0)]
    separated.stop()
    assert signalled[1:] == [("the broker", 1.0), ("Kafka's controller", 30.0)]
    assert separated.fencing.down_file.exists()
    combined.stop()
    assert signalled[3:] == [("the broker", 30.0), ("Kafka's controller", 30.0)]
    assert combined.fencing.down_file.exists()


class Launches:
    """A `Launcher` that records what it was asked to do."""

    def __init__(self) -> None:
        self.done: list[tuple] = []

    def format(self, role, cluster, home, credentials=None) -> None:
        self.done.append(("format", role.name, cluster, home, credentials))

    def spawn(self, service, role, options, controller_alone=False) -> int:
        self.done.append(("spawn", service.name, role.name, options, controller_alone))
        return 4242


def test_the_brokers_down_time_is_forgotten_when_its_own_jvm_starts_not_its_controller(home):
    """A separated broker's next restart counts the fence from its own stop, not from when its
    controller was last started; each JVM runs with the broker's JVM options, formatted first."""
    broker = Broker(home, separate_controller=True, jvm_opts=["-Dx"])
    broker.home.mkdir(parents=True)
    broker.fencing.went_down()
    kafka = Launches()
    assert broker.launch(kafka, broker.controller, "id") == 4242
    assert broker.fencing.down_file.exists()
    assert broker.launch(kafka, broker.node, "id") == 4242
    assert not broker.fencing.down_file.exists()
    assert kafka.done == [
        ("format", "Kafka's controller", "id", broker.home, None),
        ("spawn", "Kafka's controller", "Kafka's controller", ["-Dx"], True),
        ("format", "the broker", "id", broker.home, None),
        ("spawn", "the broker", "the broker", ["-Dx"], False),
    ]
    secure = Broker(home.with_name("secure"), secure=True)
    secure.launch(kafka, secure.node, "id")
    assert kafka.done[-2][-1] is secure.credentials  # its users' SCRAM credentials


def test_each_jvm_of_a_home_is_known_by_its_properties_file_there(tmp_path):
    """A pid file is trusted only for a process whose command line names the home
    (framework/jvm/service.py): each JVM's names its own properties file, in its home."""
    broker, cluster = Broker(tmp_path / "b"), Cluster(tmp_path / "c", 2)
    services = [broker.jvm, broker.controller_jvm, *(n.jvm for n in cluster.nodes.values())]
    for service in services:
        assert service.pid_file.is_relative_to(service.home)
        assert "kafka.Kafka" in service.marks
        assert any(mark.startswith(f"{service.home}/") for mark in service.marks)
    assert len({s.marks for s in services}) == len(services)
    assert [s.name for s in services[2:]] == ["Kafka node 1", "Kafka node 2"]
