"""How the embedded Schema Registry is run, without a JVM: its port, URL, database file and
command line, and the argument that tells its process from another home's."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.jvm.jars import REGISTRY, pom_version
from framework.registry.settings import (
    DEFAULT_PORT,
    RegistryError,
    api_url,
    choose_port,
    home_mark,
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
    assert home_mark(tmp_path) in command


def test_a_registry_of_another_home_does_not_carry_our_mark(tmp_path):
    """A home that is a prefix of another's is not that one: the mark is a whole argument."""
    mine, theirs = tmp_path / "r", tmp_path / "r2"
    command = jvm_command("java", Path("r.jar"), theirs, 1, [])
    assert home_mark(mine) not in command and home_mark(theirs) in command


def test_the_jar_cache_is_named_for_the_apicurio_version_the_pom_pins():
    assert pom_version(REGISTRY, "apicurio.version") == "2.4.2.Final"
    assert REGISTRY.built and REGISTRY.marker == "apicurio-registry-*-runner.jar"
