"""The JVMs of an embedded broker, the properties each runs with, and its cluster id.

By default one JVM is the whole cluster: a KRaft "combined" node (`process.roles=broker,
controller`). In separated mode (`Broker(home, separate_controller=True)`) the KRaft controller
runs in a JVM of its own (`process.roles=controller`) and the broker in another
(`process.roles=broker`), as a production cluster runs its controller quorum apart from its
brokers: killing or stopping the broker leaves the controller up, so the restarted broker
learns the cluster's metadata from the controller instead of replaying its own log and acting
on it as the only voter. Both use a static voter set (`controller.quorum.voters`), so the
controller port may change between starts without reformatting.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path

from framework.private_files import write_private

BROKER_ID = 1
"""The broker's node id, in either mode: partitions are led by node 1."""
CONTROLLER_ID = 2
"""The controller's node id in separated mode (node ids are unique across roles)."""
CONTROLLER_ONLY = ("num.partitions", "default.replication.factor")
"""Settings the controller applies to new topics: a separated broker is not given them (Kafka
warns that it will ignore them there from 5.0)."""


@dataclass(frozen=True)
class Role:
    """One Kafka JVM of a home: what messages call it ("the broker", the combined node or the
    broker alone, or "Kafka's controller") and its files: properties, pid file, output, data."""

    name: str
    config_file: Path
    pid_file: Path
    log_file: Path
    data_dir: Path

    @property
    def formatted(self) -> bool:
        return (self.data_dir / "meta.properties").exists()

    def cluster_id(self) -> str | None:
        """The cluster id its data directory was formatted with, if it was."""
        try:
            lines = (self.data_dir / "meta.properties").read_text().splitlines()
        except OSError:
            return None
        found = [line.split("=", 1)[1].strip() for line in lines if line.startswith("cluster.id=")]
        return found[0] if found else None


def new_cluster_id() -> str:
    """A random KRaft cluster id, as `kafka-storage random-uuid` makes one: 16 bytes,
    URL-safe base64 without padding, not led by '-' (it would read as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def write_properties(path: Path, settings: dict[str, str]) -> None:
    """Write a JVM's properties file, 0600: a secure broker's holds the key stores' and its
    own user's passwords."""
    lines = [f"{k}={v}" for k, v in settings.items()]
    write_private(path, "# written by logwheel at every start\n" + "\n".join(lines))


def broker_role(home: Path) -> Role:
    files = ("server.properties", "broker.pid", "broker.log", "data")
    return Role("the broker", *(home / name for name in files))


def controller_role(home: Path) -> Role:
    """Kept under `controller/` of the home; its data directory holds the metadata log."""
    folder = home / "controller"
    return Role(
        "Kafka's controller",
        folder / "controller.properties",
        folder / "controller.pid",
        folder / "controller.log",
        folder / "data",
    )


def combined_node(port: int, controller: int, data_dir: Path) -> dict[str, str]:
    """One JVM that is both the broker and the only controller."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(BROKER_ID),
        "controller.quorum.voters": f"{BROKER_ID}@127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
    }


def separate_broker(port: int, controller: int, data_dir: Path) -> dict[str, str]:
    """The broker of separated mode: clients' listener only, the controller reached as a voter
    of the static quorum."""
    return {
        "process.roles": "broker",
        "node.id": str(BROKER_ID),
        "controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
    }


def separate_controller(controller: int, data_dir: Path) -> dict[str, str]:
    """The controller of separated mode: the only voter, its metadata log in `data_dir`."""
    return {
        "process.roles": "controller",
        "node.id": str(CONTROLLER_ID),
        "controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{controller}",
        "listeners": f"CONTROLLER://127.0.0.1:{controller}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
    }


def cluster_node(
    node: int, ports: dict[int, dict[str, int]], advertised: int, data_dir: Path
) -> dict[str, str]:
    """Node `node` of a cluster (framework/broker/cluster.py): a combined broker and voter of
    a static quorum of every node. Clients connect on PLAINTEXT, advertised at `advertised`
    (a fault proxy's port, or the listener's own); brokers replicate over INTERNAL, which
    stays direct, so a proxy cuts a broker off from the clients only."""
    own = ports[node]
    voters = ",".join(f"{i}@127.0.0.1:{p['controller']}" for i, p in sorted(ports.items()))
    return {
        "process.roles": "broker,controller",
        "node.id": str(node),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{own['port']},"
        f"INTERNAL://127.0.0.1:{own['internal']},CONTROLLER://127.0.0.1:{own['controller']}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{advertised},"
        f"INTERNAL://127.0.0.1:{own['internal']}",
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
        "CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
    }
