"""How a Kafka JVM is launched, without a JVM: the storage tool is a shell script that writes
down how it was run, and the service a recorder of the command it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.broker import launch
from framework.broker.launch import Launcher, class_archive, jvm_flags
from framework.broker.roles import broker_role, controller_role
from framework.broker.settings import CONTROLLER_JVM_OPTS, JVM_OPTS, BrokerError


class Archive:
    """The class archive's options, named for what they ask of the JVM."""

    def listing_options(self) -> str:
        return "-XX:List -Xlog:quiet"

    def mapping_options(self) -> str:
        return "-XX:Map"


class Recorder:
    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def spawn(self, command: list[str]) -> int:
        self.commands.append(command)
        return 4242


@pytest.fixture
def kafka(tmp_path, monkeypatch) -> Launcher:
    monkeypatch.setattr(launch, "class_archive", lambda java, jars: Archive())
    monkeypatch.delenv("LOGWHEEL_BROKER_JVM_OPTS", raising=False)
    return Launcher(str(tmp_path / "java"), tmp_path / "jars")


def _storage_tool(path: Path, exit_code: int, last_words: str = "") -> None:
    """A `java` that writes its working directory and arguments to `<path>.run`."""
    path.write_text(
        f'#!/bin/sh\npwd > "{path}.run"\nprintf "%s\\n" "$@" >> "{path}.run"\n'
        f'echo "{last_words}" >&2\nexit {exit_code}\n'
    )
    path.chmod(0o755)


def test_every_kafka_jvm_runs_with_logwheels_options_and_its_quiet_logging():
    flags = jvm_flags()
    assert flags[: len(JVM_OPTS)] == JVM_OPTS
    log4j = flags[-1].removeprefix("-Dlog4j2.configurationFile=")
    assert Path(log4j).name == "log4j2.properties" and Path(log4j).is_file()


def test_every_jvm_of_one_installation_shares_one_class_archive(tmp_path):
    """The JVM that lists the classes and the process that makes the archive from them must
    hold the same object (it keeps the lock and knows the list is its own)."""
    java = tmp_path / "java"
    java.write_text("")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = class_archive(str(java), tmp_path / "a")
    assert class_archive(str(java), tmp_path / "a") is first
    assert class_archive(str(java), tmp_path / "b") is not first


def test_a_broker_lists_its_classes_and_the_callers_options_come_after_logwheels(
    kafka, tmp_path, monkeypatch
):
    monkeypatch.setenv("LOGWHEEL_BROKER_JVM_OPTS", "-Xmx1g -Dfrom=env")
    service, role = Recorder(), broker_role(tmp_path)
    assert kafka.spawn(service, role, ["-Xmx384m"]) == 4242
    assert service.commands == [
        [kafka.java, *jvm_flags(), "-XX:List", "-Xlog:quiet", "-Xmx384m", "-Xmx1g",
         "-Dfrom=env", "-cp", f"{tmp_path}/jars/*", "kafka.Kafka", str(role.config_file)]
    ]  # fmt: skip


def test_a_controller_alone_maps_the_archive_and_runs_on_its_smaller_heap(
    kafka, tmp_path, monkeypatch
):
    monkeypatch.setenv("LOGWHEEL_BROKER_JVM_OPTS", "-Xmx1g")
    service, role = Recorder(), controller_role(tmp_path)
    kafka.spawn(service, role, ["-Dmine"], controller_alone=True)
    [command] = service.commands
    assert command[: len(jvm_flags()) + 1] == [kafka.java, *jvm_flags()]
    assert command[len(jvm_flags()) + 1 :] == [
        "-XX:Map", "-Dmine", "-Xmx1g", *CONTROLLER_JVM_OPTS, "-cp", f"{tmp_path}/jars/*",
        "kafka.Kafka", str(role.config_file)
    ]  # fmt: skip


def test_storage_is_formatted_once_with_the_cluster_id_in_the_home(kafka, tmp_path):
    _storage_tool(Path(kafka.java), 0)
    home, role = tmp_path / "home", broker_role(tmp_path / "home")
    home.mkdir()
    kafka.format(role, "cluster-id", home)
    ran = Path(f"{kafka.java}.run").read_text().splitlines()
    assert ran[0] == str(home)
    at = ran.index("kafka.tools.StorageTool")
    assert ran[1:at] == [*jvm_flags(), "-XX:Map", "-cp", f"{tmp_path}/jars/*"]
    assert ran[at + 1 :] == [
        "format", "--ignore-formatted", "-t", "cluster-id", "-c", str(role.config_file)
    ]  # fmt: skip
    Path(f"{kafka.java}.run").unlink()
    role.data_dir.mkdir()
    (role.data_dir / "meta.properties").write_text("cluster.id=cluster-id\n")
    kafka.format(role, "another-id", home)
    assert not Path(f"{kafka.java}.run").exists()


class Credentials:
    """A secure home's credentials as formatting uses them: an argument file it must remove."""

    def __init__(self, directory: Path) -> None:
        self.file = directory / "format.args"

    def format_arguments(self) -> list[str]:
        self.file.write_text("--add-scram\nSCRAM-SHA-512=[name=admin,password=s3cret]\n")
        return [f"@{self.file}"]

    def forget_format_arguments(self) -> None:
        self.file.unlink(missing_ok=True)

    def redact(self, text: str) -> str:
        return text.replace("s3cret", "[redacted]")


def test_a_secure_format_adds_the_users_and_a_failure_says_why_without_a_secret(kafka, tmp_path):
    _storage_tool(Path(kafka.java), 1, "bad SCRAM credential for password s3cret")
    credentials, role = Credentials(tmp_path), broker_role(tmp_path)
    with pytest.raises(BrokerError) as failed:
        kafka.format(role, "cluster-id", tmp_path, credentials)
    assert str(failed.value) == (
        f"formatting {role.data_dir} failed: bad SCRAM credential for password [redacted]"
    )
    assert Path(f"{kafka.java}.run").read_text().splitlines()[-1] == f"@{credentials.file}"
    assert not credentials.file.exists()
