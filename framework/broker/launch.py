"""How a Kafka JVM is launched, the same for a single broker, its controller and each node of a
cluster: its storage formatted once with a cluster id (`kafka-storage format`), then the JVM
spawned with logwheel's flags and the class archive that makes its start quicker.

The JVM's lifecycle after the spawn (pid file, stop, kill) is framework/jvm/service.py's; which
properties it runs with is roles.py's.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from framework.broker.roles import Role
from framework.broker.security import Credentials, last_line
from framework.broker.settings import CONTROLLER_JVM_OPTS, JVM_OPTS, BrokerError
from framework.jvm.class_archive import ClassArchive
from framework.jvm.jars import kafka_jars
from framework.jvm.process import find_java
from framework.jvm.service import Service
from framework.private_files import PRIVATE_UMASK

_archives: dict[tuple[str, Path], ClassArchive] = {}


def class_archive(java: str, jars: Path) -> ClassArchive:
    """The class archive of Kafka's JVMs (framework/jvm/class_archive.py): a node's starts
    ready in 3.3-4.0 s instead of 4.5-5.7, with 2.5-2.9 s CPU instead of 3.6-4.2. One per
    installation of the jars and this process's JVM flags; the same object for all the JVMs
    this process starts (the one whose JVM lists the classes makes the archive)."""
    if (java, jars) not in _archives:
        names = sorted(p.name for p in jars.glob("*.jar"))
        _archives[java, jars] = ClassArchive(java, "kafka", str(jars), *names, *JVM_OPTS)
    return _archives[java, jars]


def jvm_flags() -> list[str]:
    """The options every Kafka JVM starts with: its heap and collector, and logwheel's log4j2
    settings (warnings and errors only)."""
    log4j = resources.files("framework.jvm") / "log4j2.properties"
    return [*JVM_OPTS, f"-Dlog4j2.configurationFile={log4j}"]


@dataclass(frozen=True)
class Launcher:
    """The Java executable and Kafka's jars one start launches its JVMs with."""

    java: str
    jars: Path

    @classmethod
    def find(cls) -> Launcher:
        """Java as found on this machine (a `ConfigurationError` says what to install if it is
        missing) and Kafka's jars (fetched at their first use, framework/jvm/jars.py)."""
        java = find_java("Kafka")
        return cls(java, kafka_jars())

    @property
    def classpath(self) -> str:
        return f"{self.jars}/*"

    def format(
        self, role: Role, cluster: str, home: Path, credentials: Credentials | None = None
    ) -> None:
        """Format a role's data directory once (a KRaft log needs a cluster id before first
        use; a separated broker and its controller share one). `credentials`, for a secure
        broker, adds its users' SCRAM credentials; the tool runs in `home`."""
        if role.formatted:
            return
        sharing = class_archive(self.java, self.jars).mapping_options().split()
        command = [self.java, *jvm_flags(), *sharing, "-cp", self.classpath]
        command += ["kafka.tools.StorageTool"]
        command += ["format", "--ignore-formatted", "-t", cluster, "-c"]
        command += [str(role.config_file)]
        if credentials is not None:
            command += credentials.format_arguments()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, cwd=home, umask=PRIVATE_UMASK
            )
        finally:
            if credentials is not None:
                credentials.forget_format_arguments()
        if done.returncode != 0:
            reason = credentials.redact(last_line(done)) if credentials else last_line(done)
            raise BrokerError(f"formatting {role.data_dir} failed: {reason}")

    def spawn(
        self, service: Service, role: Role, options: list[str], controller_alone: bool = False
    ) -> int:
        """Start a role's JVM as `service` (`Service.spawn`), with the caller's `options` and
        `LOGWHEEL_BROKER_JVM_OPTS` after logwheel's own (later options win); its pid. A JVM
        that is a broker lists its classes for the class archive (`keep_archive`); a
        `controller_alone` runs on a smaller heap and only maps the archive."""
        extra = [*options, *os.environ.get("LOGWHEEL_BROKER_JVM_OPTS", "").split()]
        if controller_alone:
            extra += CONTROLLER_JVM_OPTS
        archive = class_archive(self.java, self.jars)
        sharing = archive.mapping_options() if controller_alone else archive.listing_options()
        command = [self.java, *jvm_flags(), *sharing.split(), *extra, "-cp", self.classpath]
        command.append("kafka.Kafka")
        command.append(str(role.config_file))
        return service.spawn(command)

    def keep_archive(self) -> None:
        """Once the JVMs are ready: make the class archive from the classes a broker this
        process spawned listed, if one did (`ClassArchive.build`)."""
        class_archive(self.java, self.jars).build(self.java, self.classpath)
