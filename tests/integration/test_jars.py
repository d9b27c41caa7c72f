"""An installed logwheel has no checkout to run `make jars` in: the first `broker start`
fetches Kafka's jars into the user cache with Maven, and a broker starts from them; the first
`registry start` builds the Schema Registry's jar there (that build runs only with
LOGWHEEL_TEST_JAR_BUILD=1: `make jars` builds it through the same code path)."""

from __future__ import annotations

import os

import pytest

from framework.broker.embedded import Broker
from framework.jvm import jars
from framework.jvm.jars import KAFKA, REGISTRY, kafka_jars, registry_jar
from tests.support_broker import first_group_reads


def test_a_fresh_jar_cache_is_filled_once_and_a_broker_runs_from_it(tmp_path, monkeypatch):
    monkeypatch.setattr(jars, "CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setenv("LOGWHEEL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(KAFKA.env, raising=False)
    directory = kafka_jars()
    assert directory.parent == tmp_path / "home" / "jars"
    assert any(directory.glob("kafka_2.13-*.jar"))
    assert [p.name for p in directory.parent.iterdir() if p.name.startswith(".kafka")] == []
    assert kafka_jars() == directory  # found, not fetched again
    broker = Broker(tmp_path / "broker")
    started = broker.start(port=0, say=lambda _: None)
    try:
        assert started.address.startswith("127.0.0.1:")
        assert first_group_reads(started.address) == 10  # ready for its first group
    finally:
        broker.stop()


def _no_maven(*_args, **_kwargs):
    raise AssertionError("registry_jar() ran Maven: it must find the jar `make jars` built")


def test_the_registry_jar_make_jars_built_is_found_without_building(monkeypatch):
    """`make jars` builds the registry's jar through `registry_jar()`'s own code path (the
    `jars registry` command); here it is only found, never rebuilt: a 136 MB build inside
    `make test` is an I/O burst the shared test broker does not need. The full fresh-cache
    build runs with LOGWHEEL_TEST_JAR_BUILD=1."""
    monkeypatch.setattr(jars, "fetch", _no_maven)
    if not os.environ.get(REGISTRY.env):
        checkout = jars.CHECKOUT / "ops" / "jars" / "registry"
        if not any(checkout.glob(REGISTRY.marker)):
            pytest.skip("no registry jar built: run `make jars` (or set LOGWHEEL_REGISTRY_JARS)")
    jar = registry_jar()
    assert jar.name == "apicurio-registry-2.4.2.Final-runner.jar"
    assert jar.stat().st_size > 50_000_000  # one jar with every dependency in it


def test_registry_jars_named_by_the_environment_or_cached_are_used_as_they_are(
    tmp_path, monkeypatch
):
    """LOGWHEEL_REGISTRY_JARS wins over the checkout and the cache; without it and without a
    checkout, a jar already in the user cache is used: neither builds anything."""
    monkeypatch.setattr(jars, "fetch", _no_maven)
    named = tmp_path / "named"
    named.mkdir()
    (named / "apicurio-registry-2.4.2.Final-runner.jar").write_bytes(b"PK")
    monkeypatch.setenv(REGISTRY.env, str(named))
    assert registry_jar() == named / "apicurio-registry-2.4.2.Final-runner.jar"

    monkeypatch.delenv(REGISTRY.env)
    monkeypatch.setattr(jars, "CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setenv("LOGWHEEL_HOME", str(tmp_path / "home"))
    cached = tmp_path / "home" / "jars" / "registry-2.4.2.Final"
    cached.mkdir(parents=True)
    (cached / "apicurio-registry-2.4.2.Final-runner.jar").write_bytes(b"PK")
    assert registry_jar() == cached / "apicurio-registry-2.4.2.Final-runner.jar"


@pytest.mark.skipif(
    os.environ.get("LOGWHEEL_TEST_JAR_BUILD") != "1",
    reason="builds the 136 MB registry jar with Maven: opt in with LOGWHEEL_TEST_JAR_BUILD=1",
)
def test_a_fresh_jar_cache_gets_the_registry_built_once(tmp_path, monkeypatch):
    """The Schema Registry's jar is built by Maven from the pom shipped in the package (seconds
    once ~/.m2 holds Apicurio's parts), then found without building again."""
    monkeypatch.setattr(jars, "CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setenv("LOGWHEEL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(REGISTRY.env, raising=False)
    jar = registry_jar()
    assert jar.parent == tmp_path / "home" / "jars" / "registry-2.4.2.Final"
    assert jar.name == "apicurio-registry-2.4.2.Final-runner.jar"
    assert jar.stat().st_size > 50_000_000  # one jar with every dependency in it
    assert [p.name for p in jar.parent.parent.iterdir() if p.name.startswith(".registry")] == []
    built = jar.stat().st_mtime_ns
    assert registry_jar() == jar and jar.stat().st_mtime_ns == built  # found, not built again
