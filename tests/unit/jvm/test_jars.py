"""Where a JVM part's jars are found: the environment variable, else the checkout's
`ops/jars`, else the user cache (fetched there on first use); errors that name the fix."""

from __future__ import annotations

import pytest

from framework.errors import ConfigurationError
from framework.jvm import jars
from framework.jvm.jars import KAFKA, REGISTRY, SPARK, _take_built, locate, pom_version


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """No checkout jars, an empty jar cache, no environment variables."""
    monkeypatch.setattr(jars, "CHECKOUT", tmp_path / "checkout")
    monkeypatch.setenv("LOGWHEEL_HOME", str(tmp_path / "home"))
    for part in (KAFKA, SPARK, REGISTRY):
        monkeypatch.delenv(part.env, raising=False)
    return tmp_path


def _jar(directory, name):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("")


def test_the_variable_wins_then_the_checkout_then_the_cache(elsewhere, monkeypatch):
    cached = elsewhere / "home" / "jars" / "kafka-4.3.1"
    _jar(cached, "kafka_2.13-4.3.1.jar")
    assert locate(KAFKA, "4.3.1") == cached
    checkout = elsewhere / "checkout" / "ops" / "jars" / "kafka"
    _jar(checkout, "kafka_2.13-4.3.1.jar")
    assert locate(KAFKA, "4.3.1") == checkout
    mine = elsewhere / "mine"
    _jar(mine, "kafka_2.13-4.3.1.jar")
    monkeypatch.setenv("LOGWHEEL_KAFKA_JARS", str(mine))
    assert locate(KAFKA, "4.3.1") == mine


def test_a_variable_naming_a_directory_without_the_jars_says_so(elsewhere, monkeypatch):
    monkeypatch.setenv("LOGWHEEL_KAFKA_JARS", str(elsewhere))
    with pytest.raises(ConfigurationError, match="LOGWHEEL_KAFKA_JARS=.* holds no kafka_2.13"):
        locate(KAFKA, "4.3.1")


def test_without_maven_the_first_use_names_what_to_install(elsewhere, monkeypatch):
    monkeypatch.setenv("PATH", str(elsewhere))
    with pytest.raises(ConfigurationError, match=r"needs Maven .*apt-get install maven"):
        locate(SPARK, "4.2.0", {"spark.version": "4.2.0"})
    assert not (elsewhere / "home" / "jars" / "spark-kafka-4.2.0").exists()


def test_the_cache_is_named_for_the_version_the_pom_pins():
    assert pom_version(KAFKA, "kafka.version").startswith("4.")


def test_without_maven_the_registry_names_what_to_install(elsewhere, monkeypatch):
    monkeypatch.setenv("PATH", str(elsewhere))
    with pytest.raises(ConfigurationError, match=r"registry start needs Maven .*apt-get"):
        locate(REGISTRY, "2.4.2.Final")
    assert not (elsewhere / "home" / "jars" / "registry-2.4.2.Final").exists()


def test_a_built_part_keeps_only_the_runnable_jar_maven_built(tmp_path):
    target, out = tmp_path / "target", tmp_path / "out"
    _jar(target, "apicurio-registry-2.4.2.Final-runner.jar")
    _jar(target, "apicurio-registry-2.4.2.Final.jar")  # the thin jar, not runnable
    assert _take_built(REGISTRY, target, out)
    assert [p.name for p in out.iterdir()] == ["apicurio-registry-2.4.2.Final-runner.jar"]
    assert not _take_built(REGISTRY, target, tmp_path / "none")
