"""A broker whose KRaft controller runs in a JVM of its own (`Broker(separate_controller=True)`,
the seeded chaos run's broker): a broker fault leaves the controller running, the restarted
broker's transaction coordinator never works on stale leadership, and `stop` ends both JVMs.

With one combined JVM a restarted node first acts on the metadata it replayed (it leads every
partition, its transaction coordinator loads and sends the markers of half-completed
transactions), then the controller in it fences its previous incarnation and elects it again:
meanwhile its partitions have no leader, and Kafka skips transaction markers to such a
partition (`tests/integration/test_hanging_transactions.py`). A separated broker restarted
before the controller fenced its previous incarnation does the same, so `Broker.start` waits
for that fence. A broker of its own: the test kills it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from framework.broker.embedded import Broker
from framework.jvm.process import alive
from tests.support import TRANSACTIONS_LOG4J

pytestmark = pytest.mark.timeout(240)

FAST = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "500"}
"""The chaos run's settings: a killed broker's registration expires in 2 s, not 9."""


def _separated(home: Path) -> Broker:
    """Logging the transaction coordinator's loads (`TRANSACTIONS_LOG4J`)."""
    jvm_opts = ["-XX:TieredStopAtLevel=1", TRANSACTIONS_LOG4J]
    return Broker(home, settings=FAST, jvm_opts=jvm_opts, separate_controller=True)


LOADING = re.compile(r"Loading transaction metadata from (__transaction_state-\d+) at epoch (\d+)")


def _loads(text: str) -> list[tuple[str, int]]:
    """(partition, leader epoch) of each load of the transaction coordinator, in order."""
    return [(m.group(1), int(m.group(2))) for m in LOADING.finditer(text)]


def _jvms_of(home: Path) -> list[str]:
    """The command lines of every process that names `home` (its JVMs name their config)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "kafka.Kafka" in command and str(home) in command:
                    found.append(command)
    return found


def _leaders(bootstrap: str, topic: str) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 1000})
    meta = admin.list_topics(topic, timeout=1).topics[topic]
    if meta.error is not None:
        raise RuntimeError(meta.error)
    return [p.leader for p in meta.partitions.values()]


def _sigkill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    while alive(pid):  # reaps it: the JVM is this process's child
        time.sleep(0.05)


def test_a_killed_broker_comes_back_under_the_same_controller_and_stop_ends_both(tmp_path):
    home = tmp_path / "broker"
    broker = _separated(home)
    try:
        started = broker.start(port=0, say=lambda _: None)
        controller = broker.controller_pid()
        assert controller is not None and controller != started.pid
        assert len(_jvms_of(home)) == 2

        _sigkill(started.pid)
        again = broker.start(port=0, say=lambda _: None)
        assert again.started and again.address == started.address
        assert broker.controller_pid() == controller

        broker.stop(keep_controller=True)
        assert broker.running_pid() is None and broker.controller_pid() == controller
        assert broker.start(port=0, say=lambda _: None).address == started.address
    finally:
        Broker(home).stop()  # a home made separated stays so: stop finds its controller
    assert _jvms_of(home) == []


def test_a_broker_restarted_at_once_loads_its_transactions_only_as_the_elected_leader(tmp_path):
    """SIGKILL and start again at once: the new incarnation's transaction coordinator loads
    each `__transaction_state` partition only at a leader epoch the controller elected it at,
    never at the stale one its previous incarnation led at (that load is followed by the
    fence, when markers it sends are skipped for partitions without a leader)."""
    broker = _separated(tmp_path / "broker")
    bootstrap = broker.start(port=0, say=lambda _: None).address
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "restarted"})
        producer.init_transactions(30)
        before = dict(_loads(broker.log_file.read_text()))
        assert before, "the coordinator logged no loads (TRANSACTIONS_LOG4J)"
        seen = broker.log_file.stat().st_size
        broker.kill()
        broker.start(port=0, say=lambda _: None)
        producer.begin_transaction()  # the coordinator answers again: it has loaded
        producer.commit_transaction(30)
        after = _loads(broker.log_file.read_bytes()[seen:].decode(errors="replace"))
    finally:
        broker.stop()
    assert {partition for partition, _ in after} == set(before)
    stale = [(p, epoch) for p, epoch in after if epoch <= before[p]]
    assert not stale, f"loaded at the previous incarnation's leader epochs: {stale}"
