"""Fixtures shared by every suite: a Kafka broker for the session, unique names, topics.

`kafka` is a bootstrap address. Where it comes from (`choose_broker`): `LOGWHEEL_BOOTSTRAP` if
set; else a testcontainers Kafka when a Docker engine answers; else the embedded broker of
framework/broker/embedded.py in its own directory (.logwheel/test-broker, own port), so a
developer's broker is never touched. `LOGWHEEL_TEST_BROKER=embedded|docker` forces the choice.

The embedded test broker starts with an empty log at the first session that needs it and is
stopped by the last session still using it (sessions of several developers or terminals may
overlap), unless LOGWHEEL_KEEP_TEST_BROKER=1. A broker started by hand is left running.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import unique_name

REPO = Path(__file__).resolve().parents[1]
TEST_BROKER_DIR = REPO / ".logwheel" / "test-broker"
DOCKER_IMAGE = "confluentinc/cp-kafka:7.9.0"  # testcontainers' KafkaContainer expects cp-kafka

# A Spark driver's class archive is written once per Spark installation: each fresh checkout's
# virtualenv would pay for writing one in the suite, for no gain (one test writes it on purpose).
os.environ.setdefault("LOGWHEEL_SPARK_CLASS_ARCHIVE", "0")

# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
# pytest has closed the stream its handler writes to: a "--- Logging error ---" trace per run.
logging.getLogger("py4j").setLevel(logging.WARNING)


def choose_broker(env: Mapping[str, str], docker_available: Callable[[], bool]) -> str:
    """Which broker the session uses: "env", "docker" or "embedded" (see the module doc)."""
    if env.get("LOGWHEEL_BOOTSTRAP"):
        return "env"
    forced = env.get("LOGWHEEL_TEST_BROKER", "")
    if forced in ("docker", "embedded"):
        return forced
    return "docker" if docker_available() else "embedded"


def docker_available(timeout: float = 3.0) -> bool:
    """Whether a Docker engine answers a ping (the client alone is not enough)."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def create_topics(
    bootstrap: str,
    names: list[str],
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create topics and wait until every partition has a leader (auto-creation is off)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(n, partitions, 1, config=dict(config or {})) for n in names]
    for future in admin.create_topics(topics, request_timeout=timeout).values():
        future.result()
    deadline = time.monotonic() + timeout
    while True:
        metadata = admin.list_topics(timeout=timeout).topics
        ready = [
            n
            for n in names
            if n in metadata
            and len(metadata[n].partitions) == partitions
            and all(p.leader >= 0 for p in metadata[n].partitions.values())
        ]
        if len(ready) == len(names):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {sorted(set(names) - set(ready))} have no leaders yet")
        time.sleep(0.1)


LONGEST_FIRST = ("tests/chaos/test_seeded_chaos.py", "tests/chaos/test_seeded_chaos_cluster.py")
LONGEST_FIRST += ("tests/chaos/test_seeded_verifier.py",)
"""`make test` runs test files side by side (pytest-xdist, a file per worker, in collection
order): the seeded chaos runs take minutes, so they start first rather than last."""
LONG_BEFORE_SHORT = ("tests/integration/test_wordcount.py", "tests/integration/test_wheel.py")
"""Files of one to three minutes that sort among the last (100 and 70 s alone): started after
the chaos files, not at the end, where one worker ran them while the others had nothing left."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        if item.nodeid.startswith(LONGEST_FIRST):
            return 0
        return 1 if item.nodeid.startswith(("tests/chaos/", *LONG_BEFORE_SHORT)) else 2

    items.sort(key=rank)  # stable


@pytest.fixture
def aim(record_property: Callable[[str, object], None]) -> Callable[..., None]:
    """`aim(what, measured, target, unit="s")`: a figure the project aims to keep at or under
    `target` (a stall, a shutdown's time, an idle process's CPU) that a test measures but holds
    only to a liveness bound, for the shared machine's sake. The session ends with every
    figure beside its aim (`make chaos` runs the chaos suite at full size for them)."""

    def note(what: str, measured: float, target: float, unit: str = "s") -> None:
        record_property("aim", (what, round(measured, 2), target, unit))

    return note


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the figures tests noted with `aim` (their reports carry them across xdist)."""
    figures = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for key, value in getattr(report, "user_properties", ())
        if key == "aim"
    ]
    if not figures:
        return
    terminalreporter.section("aims (measured, not asserted)")
    for what, measured, target, unit in figures:
        verdict = "met" if measured <= target else "MISSED"
        terminalreporter.write_line(f"{what}: {measured:g}{unit} (aim {target:g}{unit}: {verdict})")


@pytest.fixture(scope="session")
def kafka() -> Iterator[str]:
    """The bootstrap address of the session's broker."""
    choice = choose_broker(os.environ, docker_available)
    if choice == "env":
        yield os.environ["LOGWHEEL_BOOTSTRAP"]
    elif choice == "docker":
        with _container() as bootstrap:
            yield bootstrap
    else:
        with _embedded(TEST_BROKER_DIR) as bootstrap:
            yield bootstrap


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Schema Registry (framework.registry's embedded one) of the test module's own, on a
    free port under a temporary home; its URL. `registry_server` gives the server itself, for
    tests that stop and start it."""
    with registry_server(tmp_path_factory.mktemp("registry")) as server:
        yield server.url()


@contextmanager
def registry_server(home: Path) -> Iterator:
    """A started embedded registry under `home`, on a free port; stopped at the end."""
    from framework.jvm.process import any_free_port
    from framework.registry.embedded import Registry

    saved = os.environ.get("LOGWHEEL_REGISTRY_PORT")
    os.environ["LOGWHEEL_REGISTRY_PORT"] = str(any_free_port())
    server = Registry(home)
    try:
        server.start(say=lambda _: None)
        yield server
    finally:
        server.stop()
        if saved is None:
            os.environ.pop("LOGWHEEL_REGISTRY_PORT", None)
        else:
            os.environ["LOGWHEEL_REGISTRY_PORT"] = saved


@pytest.fixture
def unique() -> Callable[[str], str]:
    """`unique("orders")` -> a fresh name such as "orders-1f0c9a2b3d4e"."""
    return unique_name


@pytest.fixture
def create_topic(kafka: str, unique: Callable[[str], str]) -> Callable[..., str]:
    """`create_topic(name=None, partitions=1, config=None, prefix="t")` -> the topic's name."""

    def create(
        name: str | None = None,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        prefix: str = "t",
    ) -> str:
        name = name or unique(prefix)
        create_topics(kafka, [name], partitions, config)
        return name

    return create


@contextmanager
def _container() -> Iterator[str]:
    from testcontainers.community.kafka import KafkaContainer

    from framework.broker.settings import SINGLE_NODE_SETTINGS

    container = KafkaContainer(DOCKER_IMAGE).with_kraft()
    for key, value in SINGLE_NODE_SETTINGS.items():
        container.with_env("KAFKA_" + key.upper().replace(".", "_"), value)
    with container:
        yield container.get_bootstrap_server()


@contextmanager
def _embedded(home: Path) -> Iterator[str]:
    """The shared embedded test broker, with a lease per session (a file named by its pid)."""
    from framework.broker.embedded import Broker
    from framework.jvm.process import alive

    broker = Broker(home)
    leases, marker = broker.home / "leases", broker.home / "started-by-tests"
    leases.mkdir(parents=True, exist_ok=True)
    lease = leases / str(os.getpid())
    lease.touch()
    try:
        with broker.lock():
            if broker.status() is None:
                shutil.rmtree(broker.data_dir, ignore_errors=True)  # each run starts empty
            started = broker.start(port=0)
            if started.started:
                marker.touch()
    except BaseException:
        lease.unlink(missing_ok=True)
        raise
    try:
        yield started.address
    finally:
        lease.unlink(missing_ok=True)
        with broker.lock():
            others = [p for p in leases.iterdir() if p.name.isdigit() and alive(int(p.name))]
            for stale in set(leases.iterdir()) - set(others):
                stale.unlink(missing_ok=True)
            keep = os.environ.get("LOGWHEEL_KEEP_TEST_BROKER") == "1"
            if not others and marker.exists() and not keep:
                broker.stop()
                marker.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator:
    """The checkout's test PostgreSQL server (tests/support_postgres.py), shared by every
    session; `postgres.dsn()` connects to its `logwheel` database with a password."""
    from tests.support_postgres import shared_postgres

    with shared_postgres() as server:
        yield server
