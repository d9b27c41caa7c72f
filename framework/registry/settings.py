"""How the embedded Schema Registry is run: its URL, port, database and JVM command line.

Pure functions of a home directory and a port, so that what a start does can be read and
tested without a JVM. The registry is Apicurio Registry's Quarkus application; everything
that differs from its own application.properties is given here as `-D` options:

- `quarkus.http.host`/`quarkus.http.port`: 127.0.0.1 only, on the port chosen at start;
- the Confluent-compatible API is Apicurio's `/apis/ccompat/v7`, served at the root as well
  (ConfluentApiAtRoot in the pom's module), so clients get the URL a Confluent registry has;
- `quarkus.datasource.jdbc.url`: Apicurio's storage is SQL on H2, in memory by default (a
  restart would forget every schema, and records written with its ids could no longer be
  decoded). An H2 file under the home keeps them; Apicurio creates its tables in an empty
  database and reuses them later. `WRITE_DELAY=0` writes each commit to the file at once:
  H2's default delay (about a second) loses a schema registered just before a SIGKILL, and the
  registry would then hand its id to another schema.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from framework.errors import ConfigurationError

DEFAULT_PORT = 8081
"""Confluent Schema Registry's own port, which clients and tools assume."""
HOME_PROPERTY = "logwheel.registry.home"
"""A system property naming the home on the JVM's command line: how a process is known to be
this home's registry (by its pid file, or found again when that file is lost)."""
JVM_OPTS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
"""A small heap and the quick JIT alone: a registry for development serves a few requests
per job start (clients cache schemas), and starts sooner and stays smaller this way (measured
on 2 cores: ready in 2.3 s at 150-158 MB resident, against 3.6-3.8 s at 227-233 MB with the
JVM's defaults)."""
JVM_OPTS += ["-Djava.awt.headless=true"]


class RegistryError(ConfigurationError):
    """A problem with the embedded registry the user must fix; one line that names the fix."""


def api_url(port: int) -> str:
    """The Confluent-compatible API's base URL, as `SchemaRegistryClient` takes it."""
    return f"http://127.0.0.1:{port}"


def jdbc_url(data_dir: Path) -> str:
    """The H2 database file under the home (`registry.mv.db` in `data_dir`)."""
    path = str(data_dir.resolve() / "registry")
    if ";" in path:
        raise RegistryError(
            f"the registry's home {data_dir.parent} has a ';' in its path, which H2's URL "
            "cannot hold: set LOGWHEEL_REGISTRY_DIR to another directory"
        )
    return f"jdbc:h2:file:{path};WRITE_DELAY=0"


def jvm_command(java: str, jar: Path, home: Path, port: int, extra: list[str]) -> list[str]:
    """The command line that runs the registry of `home` on `port`; `extra` JVM options go
    after logwheel's (LOGWHEEL_REGISTRY_JVM_OPTS: the later option wins)."""
    return [
        java,
        *JVM_OPTS,
        *extra,
        "-Dquarkus.http.host=127.0.0.1",
        f"-Dquarkus.http.port={port}",
        f"-Dquarkus.datasource.jdbc.url={jdbc_url(home / 'data')}",
        home_mark(home),
        "-jar",
        str(jar),
    ]


def home_mark(home: Path) -> str:
    """The argument of the registry's command line that names its home: how a running process
    is known to be `home`'s registry (framework/jvm/service.py)."""
    return f"-D{HOME_PROPERTY}={home}"


def choose_port(
    asked: str | None,
    saved: int | None,
    free: Callable[[int], bool],
    any_free: Callable[[], int],
) -> tuple[int, str | None]:
    """The port to start on, and a note when it is not the one wanted.

    Wanted is `asked` (LOGWHEEL_REGISTRY_PORT), else the port `saved` at an earlier start (so
    the URL stays the same), else 8081; when that one is taken, any free port: the URL is
    printed at every start, and several registries (one per test) run side by side.
    """
    if asked:
        if not asked.isdigit() or not 0 < int(asked) < 65536:
            raise RegistryError(f"LOGWHEEL_REGISTRY_PORT={asked!r} is not a port number")
        wanted, origin = int(asked), "LOGWHEEL_REGISTRY_PORT"
    elif saved:
        wanted, origin = saved, "its earlier port"
    else:
        wanted, origin = DEFAULT_PORT, "the default"
    if free(wanted):
        return wanted, None
    port = any_free()
    return port, f"port {wanted} ({origin}) is taken; the registry listens on {port} instead"
