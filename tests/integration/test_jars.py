"""An installed logwheel has no checkout to run `make jars` in: the first `broker start`
fetches Kafka's jars into the user cache with Maven, and a broker starts from them."""

from __future__ import annotations

from framework.broker.embedded import Broker
from framework.jvm import jars
from framework.jvm.jars import KAFKA, kafka_jars


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
