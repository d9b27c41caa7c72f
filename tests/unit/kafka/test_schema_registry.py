"""What a Schema Registry's answers mean to logwheel (kafka/schema_registry.py): an id it does
not have is a dead letter (never a retry), a registry away mid-run a `RegistryUnavailable`
(the record's partition waits), a refused schema or a registry away at start a
`RegistryConfigurationError` naming the URL and the fix. confluent-kafka's client is replaced
by a fake that answers as the registry would; the HTTP itself is tested against a real server
in test_registry_settings.py and tests/integration/test_confluent_*.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from framework.errors import BadRecord, ConfigurationError, Retry
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.schema_registry import (
    Registry,
    RegistryConfigurationError,
    RegistryUnavailable,
    connect,
)
from framework.serde.confluent import UnknownSchemaId

URL = "http://127.0.0.1:9"  # nothing listens there


class Client:
    """confluent-kafka's SchemaRegistryClient as far as Registry calls it; each method
    answers or raises what `answers` names for it."""

    def __init__(self, **answers: object) -> None:
        self.answers, self.calls = answers, []

    def _answer(self, method: str, *args: object) -> object:
        self.calls.append((method, *args))
        answer = self.answers[method]
        if isinstance(answer, list):  # one answer per call
            answer = answer.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def get_schema(self, schema_id):
        return self._answer("get_schema", schema_id)

    def register_schema(self, subject, schema):
        return self._answer("register_schema", subject)

    def get_subjects(self):
        return self._answer("get_subjects")

    def get_compatibility(self, subject):
        return self._answer("get_compatibility", subject)

    def test_compatibility(self, subject, schema):
        return self._answer("test_compatibility", subject)


def registry(**answers: object) -> Registry:
    found = Registry(RegistrySettings(URL))  # the client makes no request until asked
    found.client = Client(**answers)
    return found


def error(status: int, code: int | None = None, message: str = "refused") -> SchemaRegistryError:
    return SchemaRegistryError(status, code if code is not None else status, message)


def test_a_schema_is_read_by_id():
    assert registry(get_schema=SimpleNamespace(schema_str='"int"')).schema(3) == '"int"'


@pytest.mark.parametrize("missing", [error(404, 40403), error(404, -1), error(500, 40403)])
def test_an_id_the_registry_does_not_have_is_a_bad_record_never_a_retry(missing):
    with pytest.raises(UnknownSchemaId) as caught:
        registry(get_schema=missing).schema(3)
    assert caught.value.schema_id == 3
    assert isinstance(caught.value, BadRecord) and not isinstance(caught.value, Retry)


@pytest.mark.parametrize(
    ("away", "says"),
    [
        (error(503, 50003, "backend down"), f"the Schema Registry at {URL} failed: backend down"),
        (ConnectionError("refused"), f"{URL} does not answer (ConnectionError: refused)"),
    ],
)
def test_a_registry_away_mid_run_is_unavailable_a_retry_naming_it(away, says):
    with pytest.raises(RegistryUnavailable) as caught:
        registry(get_schema=away).schema(3)
    assert says in str(caught.value)
    assert caught.value.service == f"the Schema Registry at {URL}"


def test_registering_returns_the_id_and_a_refusal_names_the_subject_and_the_fix():
    assert registry(register_schema=7).register("words-value", '"int"') == 7
    with pytest.raises(RegistryConfigurationError) as refused:
        registry(register_schema=error(409, 409, "incompatible")).register("w-value", '"int"')
    assert "refuses the schema for subject 'w-value' (incompatible)" in str(refused.value)
    assert "`logwheel schemas check --registry`" in str(refused.value)
    with pytest.raises(RegistryConfigurationError, match="cannot register subject 'w-value'"):
        registry(register_schema=error(422, 42201, "invalid")).register("w-value", "x")
    with pytest.raises(RegistryUnavailable):  # away: a task created mid-run waits for it
        registry(register_schema=TimeoutError("slow")).register("w-value", '"int"')


def test_a_subjects_level_else_the_global_one_else_none():
    assert registry(get_compatibility="FULL").compatibility("s") == "FULL"
    global_only = registry(get_compatibility=[error(404, 40401), "BACKWARD"])
    assert global_only.compatibility("s") == "BACKWARD"
    assert global_only.client.calls == [("get_compatibility", "s"), ("get_compatibility", None)]
    assert registry(get_compatibility=[error(404), error(404)]).compatibility("s") is None
    with pytest.raises(RegistryConfigurationError, match="cannot give a compatibility level"):
        registry(get_compatibility=error(500, 50001)).compatibility("s")


def test_questions_asked_at_start_fail_in_one_line_naming_the_url():
    with pytest.raises(RegistryConfigurationError, match=f"registry at {URL} cannot list its"):
        registry(get_subjects=error(401, 40101, "unauthorized")).subjects()
    with pytest.raises(RegistryConfigurationError) as away:
        registry(test_compatibility=OSError("reset")).accepts("s", '"int"')
    assert f"{URL} does not answer (OSError: reset)" in str(away.value)
    assert "`logwheel registry start`" in str(away.value)
    assert registry(test_compatibility=True).accepts("s", '"int"') is True
    assert isinstance(away.value, ConfigurationError)


def test_a_registry_away_fails_the_start_and_a_ping_is_one_request():
    settings = RegistrySettings(URL, (("timeout", 1),))
    with pytest.raises(RegistryConfigurationError, match=f"{URL} does not answer"):
        connect(settings)
    pinged = Registry(settings)
    pinged.client = Client(get_subjects=[[]])
    pinged.ping()  # one request: GET /subjects
    assert pinged.client.calls == [("get_subjects",)]
