"""What a Schema Registry's answers mean to logwheel (kafka/schema_registry.py): an answer about
the id (none, not for this job, cannot) is a dead letter with the registry's words (never a
retry), remembered briefly; a registry away mid-run, failing or overloaded is a
`RegistryUnavailable` (the record's partition waits); a refused schema or a registry away at
start a `RegistryConfigurationError` naming the URL and the fix; the caches are bounded.
confluent-kafka's client is replaced by a fake that answers as the registry would; the HTTP
itself is tested against a real server in test_registry_settings.py and
tests/integration/test_confluent_*.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from framework.errors import BadRecord, ConfigurationError, Retry
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.schema_registry import (
    CACHE_SIZE,
    REFUSED_TTL_S,
    Registry,
    RegistryConfigurationError,
    RegistryUnavailable,
    UnreadableSchemaId,
    connect,
)
from framework.serde.codecs import DecodeError

URL = "http://127.0.0.1:9"  # nothing listens there


class Client:
    """confluent-kafka's SchemaRegistryClient as far as Registry calls it; each method
    answers or raises what `answers` names for it."""

    def __init__(self, **answers: object) -> None:
        self.answers, self.calls = answers, []
        self.cleared = 0

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

    def clear_caches(self):
        self.cleared += 1


def registry(clock=None, **answers: object) -> Registry:
    # the client makes no request until asked
    found = Registry(RegistrySettings(URL), **({"clock": clock} if clock else {}))
    found.client = Client(**answers)
    return found


def error(status: int, code: int | None = None, message: str = "refused") -> SchemaRegistryError:
    return SchemaRegistryError(status, code if code is not None else status, message)


def test_a_schema_is_read_by_id():
    assert registry(get_schema=SimpleNamespace(schema_str='"int"')).schema(3) == '"int"'


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (error(404, 40403, "Schema 3 not found"), "unknown schema id 3: the Schema Registry"),
        (error(404, -1, "Not Found"), "unknown schema id 3"),
        (error(500, 40403, "Schema 3 not found"), "unknown schema id 3"),
        (error(403, 40301, "User is denied operation Read on Subject: orders-value"), "refuses"),
        (error(401, 40101, "Unauthorized"), "refuses this job"),
        (error(422, 42202, "Invalid schema id"), "cannot give it"),
        (error(410, 410, "Gone"), "cannot give it"),
    ],
)
def test_an_answer_about_the_id_is_a_bad_record_with_the_registrys_words_never_a_retry(
    answer, says
):
    with pytest.raises(UnreadableSchemaId) as caught:
        registry(get_schema=answer).schema(3)
    reason = str(caught.value)
    assert caught.value.schema_id == 3 and caught.value.stage == "decode"
    assert isinstance(caught.value, BadRecord) and not isinstance(caught.value, Retry)
    assert says in reason and URL in reason, reason
    assert answer.error_message in reason and f"HTTP {answer.http_status_code}" in reason


def test_the_registrys_words_are_kept_to_one_short_line():
    page = "<html>\n<body>" + "x" * 5000 + "</body></html>"
    with pytest.raises(UnreadableSchemaId) as caught:
        registry(get_schema=error(403, -1, f"Unknown Schema Registry Error: {page}")).schema(3)
    reason = str(caught.value)
    assert "\n" not in reason and len(reason) < 500 and "<html> <body>xxx" in reason


def test_an_answer_about_the_id_is_remembered_for_a_while_then_asked_again():
    now = [0.0]
    found = registry(
        clock=lambda: now[0],
        get_schema=[error(403, 40301, "denied"), SimpleNamespace(schema_str='"int"')],
    )
    for _ in range(3):  # a burst of records with the id: one request
        with pytest.raises(UnreadableSchemaId, match="denied"):
            found.schema(3)
    assert found.client.calls == [("get_schema", 3)]
    now[0] += REFUSED_TTL_S + 1  # the operator granted the read meanwhile
    assert found.schema(3) == '"int"'
    assert found.client.calls == [("get_schema", 3)] * 2


def test_remembered_refusals_and_the_clients_schemas_are_bounded():
    many = CACHE_SIZE * 2
    refused = registry(get_schema=[error(404, 40403, "none")] * many)
    for schema_id in range(many):
        with pytest.raises(UnreadableSchemaId):
            refused.schema(schema_id)
    assert len(refused._refused) == CACHE_SIZE
    found = registry(get_schema=[SimpleNamespace(schema_str='"int"')] * many)
    for schema_id in range(many):
        found.schema(schema_id)
    assert found.client.cleared == 2  # emptied every CACHE_SIZE ids fetched


@pytest.mark.parametrize(
    ("away", "says"),
    [
        (error(503, 50003, "backend down"), f"the Schema Registry at {URL} failed: backend down"),
        (error(500, 50001, "store error"), "failed: store error"),
        (error(429, 42901, "too many requests"), "failed: too many requests"),
        (error(408, -1, "request timeout"), "failed: request timeout"),
        (error(400, 400, "bad request"), "failed: bad request"),  # a proxy, not the id
        (ConnectionError("refused"), f"{URL} does not answer (ConnectionError: refused)"),
        (TimeoutError("timed out"), f"{URL} does not answer (TimeoutError: timed out)"),
    ],
)
def test_a_registry_away_mid_run_is_unavailable_a_retry_naming_it(away, says):
    found = registry(get_schema=[away, away])
    for _ in range(2):  # never remembered: the next record asks again
        with pytest.raises(RegistryUnavailable) as caught:
            found.schema(3)
        assert says in str(caught.value)
        assert caught.value.service == f"the Schema Registry at {URL}"
        assert not isinstance(caught.value, DecodeError)
    assert len(found.client.calls) == 2


def test_credentials_refused_at_start_say_so():
    pinged = registry(get_subjects=error(401, 40101, "Unauthorized"))
    with pytest.raises(RegistryConfigurationError) as caught:
        pinged.ping()
    assert "Unauthorized" in str(caught.value) and "credentials in [registry]" in str(caught.value)


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
