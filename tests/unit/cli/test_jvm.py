"""`logwheel jars kafka|spark|registry [--into DIR]`: each part's jars, from the cache or
fetched into DIR, Spark's connector matching the installed pyspark. The fetching itself is
stubbed (tests/unit/jvm/test_jars.py and tests/integration/test_jars.py test it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.cli import jvm
from framework.cli.main import main
from framework.jvm.jars import KAFKA, REGISTRY, SPARK


@pytest.fixture
def fetched(monkeypatch) -> list:
    calls: list = []

    def fetch(spec, into, properties):
        calls.append((spec, into, properties))
        return into / "lib"

    monkeypatch.setattr(jvm, "fetch", fetch)
    monkeypatch.setattr(jvm, "kafka_jars", lambda: Path("/cache/kafka"))
    monkeypatch.setattr(jvm, "registry_jar", lambda: Path("/cache/registry/r-runner.jar"))
    monkeypatch.setattr(jvm, "spark_jars", lambda version: [Path(f"/cache/spark-{version}/a.jar")])
    monkeypatch.setattr(jvm, "spark_version", lambda: "3.5.1")
    return calls


@pytest.mark.parametrize(
    ("part", "printed"),
    [("kafka", "/cache/kafka"), ("registry", "/cache/registry"), ("spark", "/cache/spark-3.5.1")],
)
def test_the_cached_jars_directory_is_printed(part, printed, fetched, capsys):
    assert main(["jars", part]) == 0
    assert capsys.readouterr().out == f"{printed}\n"
    assert fetched == []


def test_into_fetches_that_part_and_spark_for_the_installed_pyspark(fetched, capsys, tmp_path):
    for part in ("kafka", "registry", "spark"):
        assert main(["jars", part, "--into", str(tmp_path)]) == 0
        assert capsys.readouterr().out == f"{tmp_path / 'lib'}\n"
    assert fetched == [
        (KAFKA, tmp_path, {}),
        (REGISTRY, tmp_path, {}),
        (SPARK, tmp_path, {"spark.version": "3.5.1"}),
    ]
