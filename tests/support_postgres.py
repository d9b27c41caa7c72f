"""A real PostgreSQL server for the tests: Debian's `postgresql` package's binaries (`make
postgres` installs the package where it is missing; CI runs as root), run as the unprivileged
`postgres` user when the tests run as root (`initdb` refuses root), in a directory of its own on a
free port of 127.0.0.1, password-authenticated over TCP.

One server serves every test session of a checkout at the same time (pytest-xdist workers, a
second terminal): each use takes a lease (a file named by its pid and a nonce), the first one starts
the server and the last one to leave stops it, as tests/conftest.py does with the broker.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "pw-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
"""The superuser's password: what the tests look for in logs that must never show it."""
DATABASE = "logwheel"
SERVER_USER = "postgres"


def binaries() -> Path:
    """The directory of `initdb`, `pg_ctl` and `postgres`: Debian's newest installed version,
    else wherever `pg_ctl` is on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    raise RuntimeError(
        "no PostgreSQL server binaries: run `make postgres` (apt-get install -y postgresql)"
    )


def _version(path: str) -> int:
    return int(Path(path).parts[-3])


def _home() -> Path:
    """Under /tmp (the server's user must reach it), one per checkout."""
    digest = hashlib.sha256(str(REPO).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"logwheel-test-postgres-{digest}"


class Postgres:
    """A PostgreSQL server under `home`: `start`, `stop`, `dsn(...)`."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.data = home / "data"
        self.bin = binaries()

    def _as_server_user(self, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        if os.geteuid() == 0:
            args = ["runuser", "-u", SERVER_USER, "--", *args]
        done = subprocess.run(args, capture_output=True, text=True, **kwargs)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {done.stdout}{done.stderr}")
        return done

    @property
    def port(self) -> int:
        return int((self.home / "port").read_text())

    def dsn(self, password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{SERVER_USER}{secret}@127.0.0.1:{self.port}/{DATABASE}"

    def running(self) -> bool:
        if not (self.data / "postmaster.pid").exists():
            return False
        try:
            self._as_server_user([str(self.bin / "pg_ctl"), "status", "-D", str(self.data)])
        except RuntimeError:
            return False
        return True

    def start(self) -> None:
        """Start it (made with `initdb` first if new); returns once it accepts connections."""
        if not (self.data / "PG_VERSION").exists():
            self._init()  # which starts it
            return
        if not (self.home / "port").exists():
            from framework.jvm.process import any_free_port

            (self.home / "port").write_text(str(any_free_port()))
        options = f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1"
        options += " -c fsync=off -c full_page_writes=off -c max_connections=200"
        self._as_server_user(
            [str(self.bin / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data)]
            + ["-l", str(self.home / "server.log"), "-o", options]
        )

    def stop(self, mode: str = "fast") -> None:
        if self.running():
            self._as_server_user(
                [str(self.bin / "pg_ctl"), "stop", "-w", "-m", mode, "-D", str(self.data)]
            )

    def _init(self) -> None:
        shutil.rmtree(self.data, ignore_errors=True)
        self.home.mkdir(parents=True, exist_ok=True)
        pwfile = self.home / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.home, SERVER_USER)
            shutil.chown(pwfile, SERVER_USER)
        os.chmod(pwfile, 0o600)
        self._as_server_user(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", SERVER_USER]
            + ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
            + ["-E", "UTF8", "--locale=C.UTF-8"]
        )
        pwfile.unlink()
        (self.home / "port").unlink(missing_ok=True)
        self.start()
        self._as_server_user(
            [str(self.bin / "createdb"), "-h", str(self.home), "-p", str(self.port)]
            + ["-U", SERVER_USER, DATABASE]
        )


@contextmanager
def shared_postgres() -> Iterator[Postgres]:
    """The checkout's test server, started if needed, with a lease for this process."""
    from framework.jvm.process import alive

    server = Postgres(_home())
    server.home.mkdir(parents=True, exist_ok=True)
    os.chmod(server.home, 0o755)
    leases = server.home / "leases"
    leases.mkdir(exist_ok=True)
    # one lease per use, not per process: a benchmark run in process inside a test that holds
    # the fixture must not give the test's lease back with its own
    lease = leases / f"{os.getpid()}.{os.urandom(4).hex()}"
    with _locked(server.home):
        lease.touch()
        if not server.running():  # each run starts empty, on a free port
            shutil.rmtree(server.data, ignore_errors=True)
            (server.home / "port").unlink(missing_ok=True)
            server.start()
    try:
        yield server
    finally:
        with _locked(server.home):
            lease.unlink(missing_ok=True)
            others = [p for p in leases.iterdir() if alive(int(p.name.split(".")[0]))]
            for stale in set(leases.iterdir()) - set(others):
                stale.unlink(missing_ok=True)
            if not others:
                server.stop()


@contextmanager
def private_postgres() -> Iterator[Postgres]:
    """A server of the caller's own, in a fresh directory (under /tmp, which the server's user
    can reach, unlike pytest's tmp_path), stopped and removed at the end."""
    home = Path(tempfile.mkdtemp(prefix="logwheel-test-pg-"))
    os.chmod(home, 0o755)
    server = Postgres(home)
    try:
        server.start()
        yield server
    finally:
        server.stop(mode="immediate")
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def wait_ready(server: Postgres, timeout: float = 60) -> None:
    """Until the server accepts a connection (after a restart in a test)."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(server.dsn(), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
