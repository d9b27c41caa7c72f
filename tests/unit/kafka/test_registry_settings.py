"""`[registry]` in --config: its keys checked at start, the URL by precedence
(`Pipeline(registry=)` > `[registry] url` > `LOGWHEEL_SCHEMA_REGISTRY`), the client settings
(TLS, timeouts) handed to confluent-kafka's client for whichever URL wins, its credentials only
to the origin its own url names and never over plain http:// off this machine, secrets (and
every URL of a list's user info) never in a message; and the subject name strategies."""

from __future__ import annotations

import base64
import io
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from framework import Pipeline, PipelineError
from framework.core.logs import setup
from framework.errors import ConfigurationError
from framework.kafka.registry_settings import (
    REGISTRY_ENV,
    RegistrySettings,
    at_url,
    redact,
    registry_settings,
    resolve,
)
from framework.kafka.schema_registry import (
    Registry,
    RegistryConfigurationError,
    RegistryUnavailable,
    subject_namer,
)
from framework.serde.catalogue import default_schemas
from framework.serde.codecs import DecodeError
from framework.serde.confluent import WireFormat, frame
from framework.streaming.loading import registry_settings as from_file

ORIGIN = "--config job.toml [registry]"
SECRET = "s3cr3t-Pa55"


def _pipeline(registry: str | None = None, strategy: str | None = None) -> Pipeline:
    return Pipeline("regset", registry=registry, subject_strategy=strategy)


def test_the_pipelines_url_wins_over_the_files_which_wins_over_the_environment(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="framework.kafka.registry_settings")
    monkeypatch.setenv(REGISTRY_ENV, "http://env:8081")
    file = registry_settings({"url": "http://file:8081", "ssl.ca.location": "/ca.pem"}, ORIGIN)
    assert resolve(_pipeline("http://code:8081"), file).url == "http://code:8081"
    assert resolve(_pipeline("http://code:8081"), file).url == "http://code:8081"
    said = [r.getMessage() for r in caplog.records]
    assert said == ["Pipeline(registry=http://code:8081) wins over [registry] url http://file:8081"]
    assert resolve(_pipeline(), file).url == "http://file:8081"
    assert resolve(_pipeline(), None).url == "http://env:8081"
    assert resolve(_pipeline(), registry_settings({}, ORIGIN)).url == "http://env:8081"
    # the file's client settings go with whichever URL wins
    assert resolve(_pipeline("http://code:8081"), file).client == (("ssl.ca.location", "/ca.pem"),)
    monkeypatch.delenv(REGISTRY_ENV)
    assert resolve(_pipeline(), None) is None


def test_the_pipelines_strategy_wins_over_the_files_and_topic_is_the_default(monkeypatch):
    monkeypatch.setenv(REGISTRY_ENV, "http://env:8081")
    file = registry_settings({"subject_name_strategy": "record"}, ORIGIN)
    assert resolve(_pipeline(strategy="topic_record"), file).subject_strategy == "topic_record"
    assert resolve(_pipeline(), file).subject_strategy == "record"
    assert resolve(_pipeline(), None).subject_strategy == "topic"


def test_an_unknown_key_fails_in_one_line_naming_it_and_the_accepted_ones():
    with pytest.raises(ConfigurationError) as caught:
        registry_settings({"url": "http://r:8081", "basic.auth.password": SECRET}, ORIGIN)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(ORIGIN)
    assert "unknown key 'basic.auth.password'" in message
    assert "basic.auth.user.info" in message and "subject_name_strategy" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"subject_name_strategy": "by-topic"}, "use one of ('topic', 'record', 'topic_record')"),
        ({"url": "registry:8081"}, "url must be http://HOST:PORT"),
        ({"basic.auth.credentials.source": "SASL_INHERIT"}, "USER_INFO or URL"),
        ({"basic.auth.credentials.source": "USER_INFO"}, "needs basic.auth.user.info"),
        ({"ssl.ca.location": ["/a.pem"]}, "ssl.ca.location must be a string or a number"),
        ({"basic.auth.user.info": "${NOT_SET_ANYWHERE}"}, "export NOT_SET_ANYWHERE"),
    ],
)
def test_bad_settings_fail_at_start_naming_the_fix(table, says):
    with pytest.raises(ConfigurationError) as caught:
        registry_settings(table, ORIGIN)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_strategy_on_the_pipeline_fails_when_it_is_declared():
    with pytest.raises(PipelineError, match="subject strategy 'topicname'"):
        _pipeline(strategy="topicname")


def test_secrets_are_expanded_from_the_environment_and_never_shown(monkeypatch):
    monkeypatch.setenv("REG_PASSWORD", SECRET)
    settings = registry_settings(
        {"url": "http://r:8081", "basic.auth.user.info": "team:${REG_PASSWORD}"}, ORIGIN
    )
    assert dict(settings.client)["basic.auth.user.info"] == f"team:{SECRET}"
    assert SECRET not in repr(settings) and "basic.auth.user.info" in repr(settings)
    # the client refuses a malformed user info: its message names the setting, not the value
    bad = RegistrySettings("https://r:8081", (("basic.auth.user.info", SECRET),))
    with pytest.raises(RegistryConfigurationError) as caught:
        Registry(bad)
    assert "basic.auth.user.info" in str(caught.value) and SECRET not in str(caught.value)
    # and a URL carrying user info is shown without it
    assert redact(f"https://team:{SECRET}@r.example:8081/x") == "https://r.example:8081/x"
    unreachable = RegistrySettings(f"http://team:{SECRET}@127.0.0.1:9", (("timeout", 1),))
    with pytest.raises(RegistryConfigurationError) as caught:
        Registry(unreachable).ping()
    assert SECRET not in str(caught.value) and "http://127.0.0.1:9" in str(caught.value)


def test_the_config_file_table_is_read_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("REG_URL", "http://file:8081")
    config = tmp_path / "job.toml"
    config.write_text('[registry]\nurl = "${REG_URL}"\nsubject_name_strategy = "record"\n')
    assert from_file(str(config)) == RegistrySettings("http://file:8081", (), "record")
    assert from_file(None) is None
    config.write_text('[kafka]\n"acks" = "all"\n')
    assert from_file(str(config)) is None
    config.write_text('[registry]\n"bearer.auth.tokn" = "x"\n')
    with pytest.raises(ConfigurationError, match=r"job.toml \[registry\]: unknown key"):
        from_file(str(config))


class _Registry(BaseHTTPRequestHandler):
    """Just enough of a registry to answer `GET /subjects`, noting the Authorization header."""

    seen: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Registry.seen.append(self.headers.get("Authorization"))
        body = b"[]"
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    """The port of a `_Registry` serving on 127.0.0.1 for the test."""
    server = HTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Registry.seen = []
    yield server.server_port
    server.shutdown()


def test_basic_auth_from_the_file_reaches_the_registrys_requests(http_port):
    url = f"http://127.0.0.1:{http_port}"
    file = registry_settings({"url": url, "basic.auth.user.info": f"team:{SECRET}"}, ORIGIN)
    Registry(resolve(_pipeline(f"{url}/"), file)).ping()  # the same origin, spelled otherwise
    Registry(resolve(_pipeline(), file)).ping()
    basic = "Basic " + base64.b64encode(f"team:{SECRET}".encode()).decode()
    assert _Registry.seen == [basic, basic]


CREDENTIALS = [
    {"basic.auth.user.info": f"team:{SECRET}"},
    {"bearer.auth.token": SECRET, "bearer.auth.credentials.source": "STATIC_TOKEN",
     "bearer.auth.logical.cluster": "lsrc-1", "bearer.auth.identity.pool.id": "pool-1"},
    {"ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem",
     "ssl.key.password": SECRET},
]  # fmt: skip


@pytest.mark.parametrize("auth", CREDENTIALS)
@pytest.mark.parametrize(
    "elsewhere",
    [
        "https://elsewhere.example:8081",  # another host
        "https://registry.example:8082",  # another port
        "http://registry.example:8081",  # another scheme
        "https://registry.example:8081,https://elsewhere.example:8081",  # a list reaching out
    ],
)
def test_credentials_are_refused_at_start_for_a_registry_the_file_does_not_name(auth, elsewhere):
    file = registry_settings({"url": "https://registry.example:8081", **auth}, ORIGIN)
    with pytest.raises(ConfigurationError) as caught:
        resolve(_pipeline(elsewhere), file)
    message = str(caught.value)
    assert "\n" not in message and SECRET not in message
    assert f"Pipeline(registry={elsewhere})" in message
    assert "[registry] url https://registry.example:8081" in message
    assert "point both at the same one" in message
    assert next(iter(auth)) in message  # names the settings, never their values


@pytest.mark.parametrize(
    "same",
    [
        "https://registry.example:8081/",
        "https://REGISTRY.example:8081",
        "https://registry.example:8081/ccompat",
        "https://b.example,https://registry.example:8081",  # the file's list, reordered
    ],
)
def test_credentials_go_to_the_origin_the_file_names_however_it_is_spelled(same):
    url = "https://registry.example:8081,https://b.example:443"
    file = registry_settings({"url": url, "basic.auth.user.info": f"team:{SECRET}"}, ORIGIN)
    assert resolve(_pipeline(same), file).client == (("basic.auth.user.info", f"team:{SECRET}"),)
    # without credentials, the code may name any registry (and is said to, once)
    assert resolve(_pipeline("https://elsewhere:1"), registry_settings({"url": url}, ORIGIN))


def test_credentials_without_the_registry_they_are_for_fail_at_start(monkeypatch):
    monkeypatch.setenv(REGISTRY_ENV, "https://env.example:8081")
    with pytest.raises(ConfigurationError) as caught:
        registry_settings({"basic.auth.user.info": f"team:{SECRET}"}, ORIGIN)
    message = str(caught.value)
    assert message.startswith(ORIGIN) and "basic.auth.user.info without url" in message
    assert SECRET not in message and "\n" not in message


@pytest.mark.parametrize(
    "table",
    [
        {"url": "http://registry.example:8081", "basic.auth.user.info": f"team:{SECRET}"},
        {"url": "http://10.0.0.7:8081", "bearer.auth.token": SECRET},
        {"url": f"http://team:{SECRET}@registry.example:8081"},  # user info
        {"url": f"https://team:{SECRET}@a.example,http://team:{SECRET}@b.example"},
    ],
)
def test_credentials_over_plain_http_off_this_machine_are_refused_at_start(table):
    with pytest.raises(ConfigurationError) as caught:
        resolve(_pipeline(), registry_settings(table, ORIGIN))
    message = str(caught.value)
    assert "would cross the network in clear" in message and "use https://" in message
    assert SECRET not in message and "\n" not in message


def test_a_tool_given_a_url_with_a_password_over_plain_http_refuses_it():
    with pytest.raises(ConfigurationError, match="in clear to http://r.example:8081"):
        at_url(f"http://team:{SECRET}@r.example:8081")
    assert at_url(f"https://team:{SECRET}@r.example:8081") is not None
    # and a client is never made for such settings, however they were put together
    with pytest.raises(ConfigurationError, match="in clear to http://r.example:8081"):
        Registry(RegistrySettings("http://r.example:8081", (("bearer.auth.token", SECRET),)))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "[::1]", "localhost"])
def test_credentials_over_plain_http_to_this_machine_are_allowed(host):
    url = f"http://{host}:8081"
    file = registry_settings({"url": url, "basic.auth.user.info": f"team:{SECRET}"}, ORIGIN)
    assert resolve(_pipeline(), file).url == url
    assert at_url(f"http://team:{SECRET}@{host}:8081") is not None


def test_every_url_of_a_list_is_shown_without_its_user_info():
    listed = f"https://team:{SECRET}@a.example:8081, https://team:{SECRET}@b.example:8081/x"
    assert redact(listed) == "https://a.example:8081,https://b.example:8081/x"
    assert redact("https://a.example,https://b.example") == "https://a.example,https://b.example"
    settings = RegistrySettings(listed)
    assert SECRET not in repr(settings)
    # what a dead letter's logwheel.error header and the hold's log line carry
    registry = Registry(settings)
    assert SECRET not in registry.url and "b.example:8081/x" in registry.url

    class Client:  # the registry's answers: away, then no such id
        def __init__(self) -> None:
            self.answers = [ConnectionError("refused"), SchemaRegistryError(404, 40403, "none")]

        def get_schema(self, schema_id):
            raise self.answers.pop(0)

    registry.client = Client()
    with pytest.raises(RegistryUnavailable) as away:
        registry.schema(5)
    assert SECRET not in str(away.value) and SECRET not in away.value.service
    with pytest.raises(DecodeError) as dead:
        WireFormat(registry, default_schemas()).decoder("t", None)(frame(7, b""))
    assert SECRET not in str(dead.value) and "https://a.example:8081," in str(dead.value)


def test_a_password_in_the_url_stays_out_of_the_logs(http_port):
    logged = io.StringIO()
    setup("plain", stream=logged)
    try:
        Registry(resolve(_pipeline(f"http://team:{SECRET}@127.0.0.1:{http_port}"), None)).ping()
    finally:
        setup("plain")
    assert _Registry.seen[-1].startswith("Basic ")  # the user info did authenticate
    assert SECRET not in logged.getvalue()


def test_subjects_follow_confluents_strategies():
    assert subject_namer("topic")("words", "wordcount.WordCount") == "words-value"
    assert subject_namer("record")("words", "wordcount.WordCount") == "wordcount.WordCount"
    assert (
        subject_namer("topic_record")("words", "wordcount.WordCount") == "words-wordcount.WordCount"
    )


class _Subjects:
    """A schema source that notes the subjects writers register under."""

    url = "memory:"

    def __init__(self) -> None:
        self.subjects: list[str] = []

    def schema(self, schema_id: int) -> str:
        raise AssertionError("a writer never reads")

    def register(self, subject: str, schema: str) -> int:
        self.subjects.append(subject)
        return 7


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [
        ("topic", "counts-value"),
        ("record", "wordcount.WordCount"),
        ("topic_record", "counts-wordcount.WordCount"),
    ],
)
def test_a_writer_registers_under_its_strategys_subject(strategy, subject):
    source = _Subjects()
    wire = WireFormat(source, default_schemas(), subject_namer(strategy))
    encode = wire.encoder("counts", "wordcount.WordCount")
    assert source.subjects == [subject]
    assert encode({"word": "a", "count": 1})[:5] == b"\x00\x00\x00\x00\x07"
