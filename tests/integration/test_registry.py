"""The embedded Schema Registry is a real one: confluent-kafka's own client registers and reads
schemas through its Confluent-compatible API, and the ids it hands out stay the same schema's
across a stop and start, and across a SIGKILL.

Each test drives the `logwheel registry` CLI on a registry of its own (its home under
tmp_path, a free port), so test files can run side by side. The first start anywhere builds
the registry's jar (framework/jvm/jars.py): minutes when ~/.m2 lacks Apicurio's parts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from framework.jvm.process import any_free_port, wait_exit
from tests.support import REPO

pytestmark = pytest.mark.timeout(900)

WORD = {
    "type": "record",
    "name": "Word",
    "namespace": "registrytest",
    "fields": [{"name": "word", "type": "string"}, {"name": "count", "type": "long"}],
}
WORD_V2 = {**WORD, "fields": [*WORD["fields"], {"name": "lang", "type": "string", "default": ""}]}


def _schema(record: dict) -> Schema:
    return Schema(json.dumps(record), "AVRO")


@pytest.fixture
def env(tmp_path):
    """The environment of a registry of this test's own; stopped at the end."""
    env = {**os.environ, "LOGWHEEL_REGISTRY_DIR": str(tmp_path / "registry")}
    env["LOGWHEEL_REGISTRY_PORT"] = str(any_free_port())
    yield env
    _cli(env, "stop")


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "framework.cli", "registry", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a first start may build the jar
    )


def _start(env: dict[str, str]) -> str:
    """`registry start`; the URL on its last line."""
    started = _cli(env, "start")
    assert started.returncode == 0, started.stdout + started.stderr
    return started.stdout.strip().splitlines()[-1]


def test_start_is_idempotent_and_ids_survive_stop_and_start(env):
    port = env["LOGWHEEL_REGISTRY_PORT"]
    first = _cli(env, "start")
    assert first.returncode == 0, first.stdout + first.stderr
    url = first.stdout.strip().splitlines()[-1]
    assert url == f"http://127.0.0.1:{port}"
    assert re.search(r"registry ready in \d+\.\ds \(pid \d+\)", first.stdout), first.stdout
    pid = int(re.search(r"pid (\d+)", first.stdout).group(1))

    again = _cli(env, "start")
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stdout and f"pid {pid}" in again.stdout
    assert again.stdout.strip().splitlines()[-1] == url
    status = _cli(env, "status")
    assert status.returncode == 0, status.stdout
    assert status.stdout.strip().splitlines()[-1] == url

    client = SchemaRegistryClient({"url": url})
    word_id = client.register_schema("words-value", _schema(WORD))
    v2_id = client.register_schema("words-value", _schema(WORD_V2))
    assert word_id != v2_id
    assert client.register_schema("counts-value", _schema(WORD)) == word_id  # same content

    stopped = _cli(env, "stop")
    assert stopped.returncode == 0 and f"registry stopped (pid {pid})" in stopped.stdout
    assert _cli(env, "status").returncode == 3
    assert (Path(env["LOGWHEEL_REGISTRY_DIR"]) / "data" / "registry.mv.db").is_file()

    assert _start(env) == url
    client = SchemaRegistryClient({"url": url})  # no cache of the first one's answers
    assert json.loads(client.get_schema(word_id).schema_str) == WORD
    assert json.loads(client.get_schema(v2_id).schema_str) == WORD_V2
    assert client.lookup_schema("words-value", _schema(WORD)).schema_id == word_id
    assert client.get_latest_version("words-value").schema_id == v2_id
    assert sorted(client.get_subjects()) == ["counts-value", "words-value"]
    other = {**WORD, "name": "Other"}
    assert client.register_schema("others-value", _schema(other)) not in (word_id, v2_id)


def test_a_schema_registered_just_before_a_sigkill_keeps_its_id(env):
    url = _start(env)
    client = SchemaRegistryClient({"url": url})
    word_id = client.register_schema("words-value", _schema(WORD))
    pid = int(_cli(env, "status").stdout.split("pid ")[1].split(",")[0])
    os.kill(pid, signal.SIGKILL)
    assert wait_exit(pid, 30)
    assert _cli(env, "status").returncode == 3

    assert _start(env) == url
    client = SchemaRegistryClient({"url": url})
    assert json.loads(client.get_schema(word_id).schema_str) == WORD
    other = {**WORD, "name": "Other"}
    assert client.register_schema("others-value", _schema(other)) != word_id
