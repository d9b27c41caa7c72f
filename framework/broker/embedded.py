"""The embedded Kafka broker: a real Apache Kafka (KRaft, one node) run as a local Java process.

Everything logwheel does — transactions, compaction, consumer groups — needs a real broker, and
a developer should get one with one command and no Docker. `Broker(home)` keeps everything it
owns under one directory: `data/` (the log), `server.properties` (rewritten at every start),
`ports.json` (ports chosen at the first start and reused later, so addresses stay stable),
`broker.pid` and `broker.log` (the JVM's output, WARN and above). A secure broker
(`Broker(home, secure=True)`, `logwheel broker start --secure`) also keeps its certificates and
passwords in `security/` (framework/broker/security.py); a home is secure or plain for life.
A broker with a separate controller (`Broker(home, separate_controller=True)`, `logwheel broker
start --separate-controller`) runs its KRaft controller in a second JVM whose files live in
`controller/` (framework/broker/roles.py); a home is separated or combined for life, and
`stop` stops both JVMs.

How its JVMs run is in `settings.py` and `roles.py`, how one is launched in `launch.py`, how a
separated broker's restarts wait for its controller in `fencing.py`; each JVM's lifecycle (pid
file, start, stop, kill, which process is ours) in framework/jvm/service.py. Bootstrap
addresses are resolved as the contract says: `--bootstrap`, else `LOGWHEEL_BOOTSTRAP`, else
this broker (or a cluster, framework/broker/cluster.py), started if needed
(framework/broker/bootstrap.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from framework.broker.fencing import Fencing
from framework.broker.launch import Launcher
from framework.broker.readiness import coordinators_serve, registered_brokers
from framework.broker.roles import (
    CONTROLLER_ONLY,
    Role,
    broker_role,
    combined_node,
    controller_role,
    new_cluster_id,
    separate_broker,
    separate_controller,
    write_properties,
)
from framework.broker.security import ADMIN_USER, Credentials, SecurityError
from framework.broker.settings import (
    DEFAULT_PORT,
    DEFAULT_SECURE_PORT,
    SINGLE_NODE_SETTINGS,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    BrokerError,
)
from framework.jvm.process import HomeLock, any_free_port, port_free, read_json
from framework.jvm.service import (
    Say,
    Service,
    Started,
    await_ready,
    home_from_env,
    say_to_stderr,
)


def default_home(secure: bool = False) -> Path:
    """`LOGWHEEL_BROKER_DIR`, or `.logwheel/broker` (`.logwheel/secure-broker` for a secure
    one) under the current directory."""
    default = ".logwheel/secure-broker" if secure else ".logwheel/broker"
    return home_from_env("LOGWHEEL_BROKER_DIR", default)


def _spinner(text: str) -> contextlib.AbstractContextManager:
    """A rich spinner on an interactive stderr; nothing when output goes to a file or pipe."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(text)


class Broker:
    """One embedded broker, identified by its home directory. `secure` asks for SASL_SSL and
    ACLs; a home made secure stays secure. `separate_controller` runs the KRaft controller in
    a JVM of its own; a home made separated stays separated."""

    def __init__(
        self,
        home: Path | str,
        secure: bool = False,
        settings: dict[str, str] | None = None,
        jvm_opts: list[str] | None = None,
        separate_controller: bool = False,
    ) -> None:
        """`settings` are broker properties over the single-node defaults (given to the
        controller too, in separated mode) and `jvm_opts` extra JVM options (the chaos tests'
        broker fences a killed broker's registration sooner and starts on the quick JIT alone,
        since it is restarted again and again)."""
        self.home = Path(home).resolve()
        self.credentials = Credentials(self.home)
        self.secure = secure or self.credentials.exists()
        self.settings = dict(settings or {})
        self.jvm_opts = list(jvm_opts or [])
        self.node = broker_role(self.home)
        self.controller = controller_role(self.home)
        self.separate = separate_controller or self.controller.formatted
        self.data_dir = self.node.data_dir
        self.config_file = self.node.config_file
        self.ports_file = self.home / "ports.json"
        self.pid_file = self.node.pid_file
        self.log_file = self.node.log_file
        self.fencing = Fencing(self.home, self.node, self.settings)
        self.lock = HomeLock(self.home)
        self.jvm = self._service(self.node, lambda: self._saved_port("port"))
        self.controller_jvm = self._service(
            self.controller, lambda: self._saved_port("controller_port")
        )

    def _service(
        self, role: Role, port: Callable[[], int | None], name: str | None = None
    ) -> Service:
        """A role's JVM (called `name` in messages, else the role's name): known by its main
        class and its properties file, which names the home, and by holding the listener of
        `port`, the role's port as saved in the home."""
        marks = ("kafka.Kafka", str(role.config_file))
        files = (role.pid_file, role.log_file)
        return Service(
            name or role.name, self.home, *files, marks, port, BrokerError, self.credentials.redact
        )

    def _saved_port(self, which: str) -> int | None:
        saved = read_json(self.ports_file)
        return saved.get(which) if saved else None

    # -- queries ------------------------------------------------------------------------

    def running_pid(self, say: Say | None = None) -> int | None:
        """The pid of this home's broker process (the combined node, or the broker alone).
        With `say`, a stale pid file is removed (and said so) and a running broker whose pid
        file was lost is adopted."""
        return self.jvm.pid(say)

    def controller_pid(self, say: Say | None = None) -> int | None:
        """The pid of this home's controller process in separated mode, else None."""
        return self.controller_jvm.pid(say)

    def port(self) -> int | None:
        """The client port chosen at the first start, if any."""
        return self._saved_port("port")

    def status(self) -> str | None:
        """The bootstrap address when the broker runs and listens on its port (its process
        holds that socket: not another program that took the port), else None."""
        pid = self.running_pid()
        if pid and self.jvm.serves(pid):
            return f"127.0.0.1:{self.port()}"
        return None

    # -- start / stop -------------------------------------------------------------------

    def start(
        self,
        port: int | None = None,
        timeout: float = START_TIMEOUT_S,
        say: Say = say_to_stderr,
    ) -> Started:
        """Start the broker unless it runs; idempotent.

        `port`: None takes `LOGWHEEL_BROKER_PORT`, else the port saved at the first start,
        else 9092 if free, else any free port; 0 takes the saved port if it is free, else any
        free port (for brokers of tests); a number insists on that port.
        """
        began = time.monotonic()
        with self.lock():
            pid = self.running_pid(say)
            controller_pid = self.controller_pid(say) if self.separate else None
            controller_up = not self.separate or controller_pid is not None
            if pid is not None and controller_up:
                bootstrap = f"127.0.0.1:{self.port()}"
                self._wait_ready(pid, controller_pid, bootstrap, timeout, began)
                return Started(bootstrap, False, time.monotonic() - began, pid)
            self._check_mode()
            kafka = Launcher.find()
            if self.secure:
                self._make_credentials(kafka.java)
            running = ("port",) if pid is not None else ()
            running += ("controller_port",) if controller_pid is not None else ()
            ports = self._choose_ports(port, running)
            self._write_config(ports)
            cluster = self.node.cluster_id() or self.controller.cluster_id() or new_cluster_id()
            if not controller_up:
                controller_pid = self.launch(kafka, self.controller, cluster)
                log_file = self.controller.log_file
                say(
                    f"starting Kafka's controller in {self.home} (pid {controller_pid}, "
                    f"log {log_file}) ..."
                )
            if pid is None:
                if self.separate:
                    fresh = None if controller_up else ports["controller_port"]
                    self.fencing.await_fence(fresh, timeout, say)
                pid = self.launch(kafka, self.node, cluster)
                say(f"starting Kafka in {self.home} (pid {pid}, log {self.log_file}) ...")
            bootstrap = f"127.0.0.1:{ports['port']}"
            with _spinner(f"waiting for Kafka on {bootstrap}"):
                self._wait_ready(pid, controller_pid, bootstrap, timeout, began)
            kafka.keep_archive()
            return Started(bootstrap, True, time.monotonic() - began, pid)

    def client_settings(self) -> dict[str, str]:
        """Settings an administrator's client needs besides the bootstrap: none for a plain
        broker, the admin user's SASL_SSL settings for a secure one."""
        return self.credentials.client_settings(ADMIN_USER) if self.secure else {}

    def stop(self, timeout: float = STOP_TIMEOUT_S, keep_controller: bool = False) -> int | None:
        """Stop the broker (SIGTERM, then SIGKILL after `timeout` s), then its controller
        unless `keep_controller` (a separated broker restarted under a running controller, as
        a production broker is); the broker's pid, or None."""
        with self.lock():
            # a combined node takes its controller with it: no fence to stop before
            pid = self.jvm.stop(self.fencing.stop_timeout(timeout) if self.separate else timeout)
            if pid is not None:
                self.fencing.went_down()
            if not keep_controller:
                self.controller_jvm.stop(timeout)
            return pid

    def kill(self) -> int | None:
        """SIGKILL the broker process, as a crash would (a separated broker's controller stays
        up); for tests of faults. The pid it had, or None."""
        with self.lock():
            pid = self.jvm.kill()
            if pid is not None:
                self.fencing.went_down()
            return pid

    def launch(self, kafka: Launcher, role: Role, cluster: str) -> int:
        """Start the JVM of `role` (the broker's or the controller's), its storage formatted
        first with the `cluster` id if it is new; its pid."""
        kafka.format(role, cluster, self.home, self.credentials if self.secure else None)
        if role is self.controller:
            return kafka.spawn(self.controller_jvm, role, self.jvm_opts, controller_alone=True)
        pid = kafka.spawn(self.jvm, role, self.jvm_opts)
        self.fencing.came_up()
        return pid

    # -- the steps of a start -----------------------------------------------------------

    def _check_mode(self) -> None:
        """A home keeps the mode it was formatted in: node ids and metadata logs differ."""
        if self.separate and self.secure:
            raise BrokerError(
                "a secure broker runs as one combined node: drop --separate-controller, or "
                "give the separated broker a plain home of its own (LOGWHEEL_BROKER_DIR)"
            )
        if self.separate and self.node.formatted and not self.controller.formatted:
            raise BrokerError(
                f"{self.home} holds a combined broker (controller in the same process): give "
                "the separated one a home of its own (LOGWHEEL_BROKER_DIR) or remove that "
                "directory"
            )

    def _make_credentials(self, java: str) -> None:
        if not self.credentials.exists() and (self.data_dir / "meta.properties").exists():
            raise BrokerError(
                f"{self.home} holds a plain broker: give the secure one a home of its own "
                "(LOGWHEEL_BROKER_DIR) or remove that directory"
            )
        beside_java = Path(java).resolve().parent / "keytool"
        keytool = str(beside_java) if os.access(beside_java, os.X_OK) else shutil.which("keytool")
        if keytool is None:
            raise BrokerError(
                "no `keytool` beside java nor on PATH (it makes the TLS certificates): install "
                "a full Java runtime (apt-get install openjdk-17-jre-headless)"
            )
        try:
            self.credentials.create(keytool)
        except (SecurityError, OSError, subprocess.TimeoutExpired) as err:
            raise BrokerError(f"{err}; see {self.credentials.dir}") from None

    def _choose_ports(self, wanted: int | None, running: tuple[str, ...] = ()) -> dict[str, int]:
        """Pick and persist the client and controller ports (see `start`). `running` names
        the ports ("port", "controller_port") a process of this home listens on: they stay."""
        saved = read_json(self.ports_file) or {}
        env = os.environ.get("LOGWHEEL_BROKER_PORT")
        if wanted is None and env:
            if not env.isdigit():
                raise BrokerError(f"LOGWHEEL_BROKER_PORT={env!r} is not a port number")
            wanted = int(env)
        if wanted is None and "port" in saved:
            wanted, origin = saved["port"], f"saved in {self.ports_file}"
        elif wanted == 0 and saved.get("port") and port_free(saved["port"]):
            wanted, origin = saved["port"], "saved"
        else:
            origin = "asked for"
        default = DEFAULT_SECURE_PORT if self.secure else DEFAULT_PORT
        if "port" in running and saved.get("port"):
            port = saved["port"]
        elif wanted is None:
            port = default if port_free(default) else any_free_port()
        elif wanted == 0:
            port = any_free_port()
        elif port_free(wanted):
            port = wanted
        else:
            raise BrokerError(
                f"port {wanted} ({origin}) is taken by another program: stop it, or set "
                f"LOGWHEEL_BROKER_PORT to a free port"
            )
        controller = saved.get("controller_port", port + 1)
        if "controller_port" in running:
            pass  # the running controller listens there
        elif controller == port or not port_free(controller):
            controller = any_free_port(avoid=port)
        ports = {"port": port, "controller_port": controller}
        self.ports_file.write_text(json.dumps(ports) + "\n")
        return ports

    def _write_config(self, ports: dict[str, int]) -> None:
        """Write server.properties (and, separated, controller.properties): KRaft, node 1,
        listeners on 127.0.0.1 (framework/broker/roles.py).

        A static voter set (not `--standalone`) lets the controller port change between
        starts without reformatting."""
        port, controller = ports["port"], ports["controller_port"]
        shape = separate_broker if self.separate else combined_node
        settings = {**shape(port, controller, self.data_dir), **SINGLE_NODE_SETTINGS}
        settings.update(self.settings)
        if self.separate:
            settings = {k: v for k, v in settings.items() if k not in CONTROLLER_ONLY}
        if self.secure:
            settings.update(self.credentials.server_settings(port, controller))
        write_properties(self.config_file, settings)
        if self.separate:
            self.controller.config_file.parent.mkdir(parents=True, exist_ok=True)
            alone = separate_controller(controller, self.controller.data_dir)
            write_properties(
                self.controller.config_file, {**alone, **SINGLE_NODE_SETTINGS, **self.settings}
            )

    def _wait_ready(
        self, pid: int, controller_pid: int | None, bootstrap: str, timeout: float, began: float
    ) -> None:
        """Wait until an AdminClient sees the broker in the cluster metadata, then until its
        group and transaction coordinators serve (broker/readiness.py), all on a port its own
        process listens on; a broker that never does, or whose port another program holds, is
        stopped."""
        deadline = began + timeout
        settings = self.client_settings()
        partitions = int(SINGLE_NODE_SETTINGS["offsets.topic.num.partitions"])
        watched = {self.jvm: pid}
        if controller_pid is not None:
            watched[self.controller_jvm] = controller_pid

        def ready() -> bool:
            taken = self.jvm.port_taken(pid)
            if taken is not None:  # whatever answers there is not this broker
                self.stop()
                raise BrokerError(taken)
            return (
                self.jvm.serves(pid)
                and bool(registered_brokers(bootstrap, settings))
                and coordinators_serve(bootstrap, settings, partitions, deadline)
            )

        if await_ready(watched, ready, deadline):
            return
        self.stop()
        raise BrokerError(
            f"the broker did not answer on {bootstrap}, or its group and transaction "
            f"coordinators did not load, within {timeout:.0f}s; see {self.log_file}"
        )
