"""`logwheel schemas check --registry URL` against a real Schema Registry (the module's own,
embedded): a project's schema file passes against a compatible latest version of the subjects
holding its record, and fails naming record, field and rule against an incompatible one, under
the subject's compatibility level (NONE: logwheel's own rule, both ways); a registry that does
not answer fails in one line naming its URL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from framework.cli.main import main
from framework.jvm.process import any_free_port
from framework.serde.schemas import SCHEMAS_ENV

pytestmark = pytest.mark.timeout(300)


def order(namespace: str, **changes: dict | None) -> dict:
    """A record type `<namespace>.Order`, with fields added, changed or (None) removed."""
    fields = {
        "id": {"name": "id", "type": "string"},
        "amount": {"name": "amount", "type": "long"},
    }
    for name, changed in changes.items():
        if changed is None:
            fields.pop(name)
        else:
            fields[name] = {"name": name, **changed}
    return {"type": "record", "name": "Order", "namespace": namespace, "fields": [*fields.values()]}


def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: dict) -> None:
    """The project's schema search path: one file, `schema`'s."""
    directory = tmp_path / "schemas"
    directory.mkdir(exist_ok=True)
    name = f"{schema['namespace']}.{schema['name']}"
    (directory / f"{name}.avsc").write_text(json.dumps(schema), encoding="utf-8")
    monkeypatch.setenv(SCHEMAS_ENV, str(directory))


def check(url: str, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["schemas", "check", "--registry", url])
    out, err = capsys.readouterr()
    return code, out, err


def register(client: SchemaRegistryClient, subject: str, schema: dict, level: str) -> None:
    """`schema` as the subject's next version, then the subject's level set to `level` (the
    registry has no level for a subject it does not have)."""
    client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    client.set_compatibility(subject, level)


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def test_a_compatible_latest_version_passes(registry, tmp_path, monkeypatch, capsys, namespace):
    client = SchemaRegistryClient({"url": registry})
    subject = f"{namespace}-orders-value"
    register(client, subject, order(namespace), "BACKWARD")
    register(client, subject, order(namespace, note={"type": "string", "default": ""}), "BACKWARD")
    project(tmp_path, monkeypatch, order(namespace))  # reads the latest, and is read by it

    code, out, err = check(registry, capsys)

    assert code == 0, out + err
    assert f"registry {registry}: 1 subject(s) checked ({namespace}.Order -> {subject})" in out
    assert out.strip().endswith("all compatible"), out
    assert err == ""


def test_an_incompatible_latest_version_fails_naming_field_and_rule(
    registry, tmp_path, monkeypatch, capsys, namespace
):
    """Registered under NONE (the registry takes anything), the latest turns `amount` into a
    string: logwheel's own rule still refuses the project's long, both ways."""
    client = SchemaRegistryClient({"url": registry})
    subject = f"{namespace}-orders-value"
    register(client, subject, order(namespace), "NONE")
    register(client, subject, order(namespace, amount={"type": "string"}), "NONE")
    project(tmp_path, monkeypatch, order(namespace))

    code, out, err = check(registry, capsys)

    assert code == 1, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err  # backward and forward
    for line in lines:
        assert f"{namespace}.Order.amount: type changed" in line, line
        assert "which does not promote" in line and subject in line and "NONE" in line, line
    assert "(backward:" in lines[0] and "(forward:" in lines[1], err
    assert "1 incompatible change(s)" not in out and "2 incompatible change(s)" in out, out


def test_the_subjects_compatibility_level_picks_the_rule(
    registry, tmp_path, monkeypatch, capsys, namespace
):
    """The latest adds a field without a default: the project's version still reads it
    (BACKWARD passes), readers on the latest cannot read the project's (FORWARD fails)."""
    client = SchemaRegistryClient({"url": registry})
    subject = f"{namespace}-orders-value"
    register(client, subject, order(namespace), "NONE")
    register(client, subject, order(namespace, note={"type": "string"}), "NONE")
    project(tmp_path, monkeypatch, order(namespace))

    client.set_compatibility(subject, "BACKWARD")
    code, out, err = check(registry, capsys)
    assert code == 0, out + err

    client.set_compatibility(subject, "FORWARD")
    code, out, err = check(registry, capsys)
    assert code == 1, out + err
    assert err.count("\n") == 1, err
    assert f"{namespace}.Order.note: field added without a default" in err, err
    assert "FORWARD" in err and "(forward:" in err, err


def test_a_registry_that_does_not_answer_fails_in_one_line(tmp_path, monkeypatch, capsys):
    nowhere = f"http://127.0.0.1:{any_free_port()}"
    project(tmp_path, monkeypatch, order("tdown"))
    code, out, err = check(nowhere, capsys)
    assert code == 1
    assert err.count("\n") == 1 and nowhere in err and "does not answer" in err, err
