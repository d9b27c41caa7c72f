"""How the embedded Schema Registry is run, without a JVM: its port, URL, database file and
command line, and how its process is told from another home's."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.cli.main import main
from framework.cli.registry import NOT_RUNNING
from framework.jvm.jars import REGISTRY, pom_version
from framework.registry.embedded import Registry
from framework.registry.settings import (
    DEFAULT_PORT,
    RegistryError,
    api_url,
    choose_port,
    is_registry_of,
    jdbc_url,
    jvm_command,
)


def _choose(asked=None, saved=None, taken=(9000,)):
    return choose_port(asked, saved, lambda port: port not in taken, lambda: 20_000)


def test_the_port_is_the_one_asked_for_else_the_saved_one_else_8081():
    assert _choose("9100", saved=9200) == (9100, None)
    assert _choose(None, saved=9200) == (9200, None)
    assert _choose() == (DEFAULT_PORT, None)


def test_a_taken_port_gives_way_to_a_free_one_and_says_so():
    port, note = _choose("9000")
    assert port == 20_000
    assert "port 9000 (LOGWHEEL_REGISTRY_PORT) is taken" in note and "20000" in note
    assert _choose(None, saved=9000)[0] == 20_000
    assert _choose(taken=(DEFAULT_PORT,))[0] == 20_000


@pytest.mark.parametrize("asked", ["http", "0", "70000", "-1"])
def test_a_port_that_is_no_port_number_is_refused(asked):
    with pytest.raises(RegistryError, match="LOGWHEEL_REGISTRY_PORT=.* is not a port number"):
        _choose(asked)


def test_the_url_is_the_confluent_compatible_api_on_loopback():
    assert api_url(18081) == "http://127.0.0.1:18081"


def test_schemas_go_to_an_h2_file_under_the_home_written_at_each_commit(tmp_path):
    url = jdbc_url(tmp_path / "data")
    assert url == f"jdbc:h2:file:{tmp_path.resolve()}/data/registry;WRITE_DELAY=0"
    with pytest.raises(RegistryError, match="LOGWHEEL_REGISTRY_DIR"):
        jdbc_url(tmp_path / "a;b" / "data")


def test_the_command_line_binds_loopback_and_names_its_home(tmp_path):
    command = jvm_command("/usr/bin/java", Path("/jars/r.jar"), tmp_path, 18081, ["-Xmx1g"])
    assert command[0] == "/usr/bin/java" and command[-2:] == ["-jar", "/jars/r.jar"]
    assert "-Dquarkus.http.host=127.0.0.1" in command
    assert "-Dquarkus.http.port=18081" in command
    assert f"-Dquarkus.datasource.jdbc.url={jdbc_url(tmp_path / 'data')}" in command
    assert command.index("-Xmx1g") > command.index("-Xmx256m")  # the user's option wins
    assert is_registry_of(" ".join(command), tmp_path)


def test_a_registry_of_another_home_is_not_taken_for_ours(tmp_path):
    mine, theirs = tmp_path / "r", tmp_path / "r2"
    command = " ".join(jvm_command("java", Path("r.jar"), theirs, 1, []))
    assert not is_registry_of(command, mine)
    assert not is_registry_of("java -jar something-else.jar", mine)


def test_status_of_a_registry_never_started_exits_3(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOGWHEEL_REGISTRY_DIR", str(tmp_path / "registry"))
    assert main(["registry", "status"]) == NOT_RUNNING
    assert "registry not running" in capsys.readouterr().out
    assert main(["registry", "stop"]) == 0
    assert "was not running" in capsys.readouterr().out


def test_a_stale_pid_file_is_removed_and_said(tmp_path):
    registry = Registry(tmp_path)
    registry.pid_file.write_text("999999999\n")
    said: list[str] = []
    assert registry.running_pid(said.append) is None
    assert not registry.pid_file.exists()
    assert "stale pid file" in said[0]


def test_the_jar_cache_is_named_for_the_apicurio_version_the_pom_pins():
    assert pom_version(REGISTRY, "apicurio.version") == "2.4.2.Final"
    assert REGISTRY.built and REGISTRY.marker == "apicurio-registry-*-runner.jar"
