"""An installed logwheel has no checkout to run `make jars` in: the first `broker start`
fetches Kafka's jars into the user cache with Maven, and a broker starts from them; the first
`registry start` builds the Schema Registry's jar there."""

from __future__ import annotations

from framework.broker.embedded import Broker
from framework.jvm import jars
from framework.jvm.jars import KAFKA, REGISTRY, kafka_jars, registry_jar


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
        assert started.bootstrap.startswith("127.0.0.1:")
    finally:
        broker.stop()


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
