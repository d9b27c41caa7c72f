"""`logwheel schemas check --registry` (kafka/registry_compat.py): which subjects a type is
checked against, under which rule, and what the verdict says. The registry is a fake that
answers with subjects, latest versions and levels as a registry's API does; its own
compatibility check is a real registry's in tests/integration/test_schemas_registry.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from framework.kafka import registry_compat
from framework.kafka.registry_settings import RegistrySettings
from framework.serde.catalogue import load_schemas

WORD = {
    "type": "record",
    "name": "WordCount",
    "namespace": "wordcount",
    "fields": [{"name": "word", "type": "string"}, {"name": "count", "type": "long"}],
}


class Registry:
    url = "http://reg:8081"

    def __init__(self, latest: dict[str, tuple], levels: dict, accepts: bool = True) -> None:
        self._latest, self._levels, self._accepts = latest, levels, accepts
        self.accepted: list[str] = []

    def subjects(self) -> list[str]:
        return list(self._latest)

    def latest(self, subject: str) -> SimpleNamespace:
        schema, kind = self._latest[subject]
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return SimpleNamespace(
            schema=SimpleNamespace(schema_str=text, schema_type=kind), version=3, schema_id=21
        )

    def compatibility(self, subject: str) -> str | None:
        return self._levels.get(subject)

    def accepts(self, subject: str, schema: str) -> bool:
        self.accepted.append(subject)
        return self._accepts


@pytest.fixture
def schemas(tmp_path: Path):
    (tmp_path / "wordcount.WordCount.avsc").write_text(json.dumps(WORD))
    return load_schemas(tmp_path)


def check(monkeypatch, schemas, registry: Registry):
    monkeypatch.setattr(registry_compat, "connect", lambda settings: registry)
    return registry_compat.check_against_registry(schemas, RegistrySettings(registry.url))


def test_only_subjects_holding_an_avro_record_of_a_projects_type_are_checked(monkeypatch, schemas):
    other = {"type": "record", "name": "other.Thing", "fields": []}
    registry = Registry(
        {
            "words-value": (WORD, None),  # no type given: Avro
            "things-value": (other, "AVRO"),
            "proto-value": ('syntax = "proto3";', "PROTOBUF"),
            "plain-value": ('"string"', "AVRO"),
        },
        {},
    )
    verdict = check(monkeypatch, schemas, registry)
    assert verdict.checked == [("wordcount.WordCount", "words-value")]
    assert verdict.problems == []
    assert verdict.line(1) == (
        "registry http://reg:8081: 1 subject(s) checked (wordcount.WordCount -> words-value): "
        "all compatible"
    )


def test_nothing_to_check_is_said_so(monkeypatch, schemas):
    verdict = check(monkeypatch, schemas, Registry({}, {}))
    assert verdict.line(1) == (
        "registry http://reg:8081: no subject's latest version is one of the project's 1 "
        "types: nothing to check"
    )


def _without_count() -> dict:
    return {**WORD, "fields": WORD["fields"][:1]}


@pytest.mark.parametrize(
    ("level", "broken"),
    [
        (None, True),  # no level: logwheel's own rule, both ways
        ("NONE", True),  # a registry that accepts anything does not make values readable
        ("BACKWARD", True),  # the project's version cannot read values without count
        ("FORWARD", False),  # readers on the latest ignore the project's extra count
    ],
)
def test_a_field_without_default_that_the_latest_lacks_breaks_backward_only(
    monkeypatch, schemas, level, broken
):
    registry = Registry({"words-value": (_without_count(), "AVRO")}, {"words-value": level})
    verdict = check(monkeypatch, schemas, registry)
    assert bool(verdict.problems) == broken
    label = (
        "wordcount.WordCount against subject words-value v3 (id 21) at http://reg:8081, "
        f"{level or 'no'} compatibility level"
    )
    assert all(p.startswith(label) and "count" in p for p in verdict.problems)
    if broken:
        assert f"{len(verdict.problems)} incompatible change(s)" in verdict.line(1)


def test_where_logwheels_rules_find_nothing_the_registrys_own_refusal_is_the_line(
    monkeypatch, schemas
):
    registry = Registry({"words-value": (WORD, "AVRO")}, {"words-value": "FULL"}, accepts=False)
    verdict = check(monkeypatch, schemas, registry)
    assert registry.accepted == ["words-value"]
    [problem] = verdict.problems
    assert problem.endswith(
        "the registry's own FULL check refuses wordcount.WordCount (logwheel's rules name no field)"
    )
    # under NONE or no level the registry is not asked: logwheel's rules are the rule
    unasked = Registry({"words-value": (WORD, "AVRO")}, {}, accepts=False)
    assert check(monkeypatch, schemas, unasked).problems == [] and unasked.accepted == []
