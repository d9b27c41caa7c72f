"""The secure broker's decisions that need no JVM: homes, server settings, client files."""

from __future__ import annotations

import stat
import tomllib

import pytest

from framework.broker.embedded import Broker, default_home
from framework.broker.security import (
    PASSWORD_VARS,
    STORE_VAR,
    Credentials,
    _settings_toml,
    write_private,
)
from framework.broker.settings import BrokerError
from framework.kafka.config import expand_env

SECRETS = {
    "LOGWHEEL_ADMIN_PASSWORD": "adm-Pw1",
    "LOGWHEEL_JOB_PASSWORD": "job-Pw2",
    STORE_VAR: "st-Pw3",
}


@pytest.fixture
def creds(tmp_path) -> Credentials:
    """A home whose security/ directory exists (without keytool: no real key stores)."""
    creds = Credentials(tmp_path)
    creds.dir.mkdir()
    write_private(creds.secrets_file, "".join(f"{k}={v}\n" for k, v in SECRETS.items()))
    return creds


def test_the_secure_broker_has_a_home_of_its_own(monkeypatch):
    monkeypatch.delenv("LOGWHEEL_BROKER_DIR", raising=False)
    assert str(default_home()) == ".logwheel/broker"
    assert str(default_home(secure=True)) == ".logwheel/secure-broker"
    monkeypatch.setenv("LOGWHEEL_BROKER_DIR", "/x/y")
    assert str(default_home(secure=True)) == "/x/y"


def test_a_plain_home_is_not_made_secure(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("formatted")
    with pytest.raises(BrokerError, match="holds a plain broker.*LOGWHEEL_BROKER_DIR") as error:
        Broker(tmp_path, secure=True)._make_credentials("java")
    assert "\n" not in str(error.value)


def test_a_secure_home_stays_secure(creds):
    assert Broker(creds.dir.parent).secure
    assert not Broker(creds.dir.parent / "other").secure


def test_server_settings_require_sasl_ssl_and_acls(creds, tmp_path):
    broker = Broker(tmp_path)
    broker._write_config({"port": 1234, "controller_port": 1235})
    text = broker.config_file.read_text()
    assert stat.S_IMODE(broker.config_file.stat().st_mode) == 0o600
    settings = dict(line.split("=", 1) for line in text.splitlines()[1:])
    assert settings["listeners"] == "SASL_SSL://127.0.0.1:1234,CONTROLLER://127.0.0.1:1235"
    assert settings["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SSL"
    assert settings["listener.name.controller.ssl.client.auth"] == "required"
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["authorizer.class.name"].endswith("StandardAuthorizer")
    assert settings["super.users"] == "User:admin;User:CN=logwheel-broker"
    assert "PLAINTEXT" not in text


def test_a_plain_broker_keeps_its_plain_listeners(tmp_path):
    broker = Broker(tmp_path)
    broker.home.mkdir(exist_ok=True)
    broker._write_config({"port": 1234, "controller_port": 1235})
    text = broker.config_file.read_text()
    assert "listeners=PLAINTEXT://127.0.0.1:1234,CONTROLLER://127.0.0.1:1235" in text
    assert "sasl" not in text and "authorizer" not in text


@pytest.mark.parametrize("user", list(PASSWORD_VARS))
def test_client_files_hold_references_not_passwords(creds, user):
    text = _settings_toml(creds.client_settings(user))
    assert creds.password(user) not in text
    table = tomllib.loads(text)["kafka"]
    expanded = expand_env(table, "test", {PASSWORD_VARS[user]: creds.password(user)})
    assert expanded == creds.client_settings(user)


def test_how_to_connect_names_files_not_secrets(creds):
    lines = "\n".join(creds.describe("127.0.0.1:9094"))
    assert str(creds.secrets_file) in lines and str(creds.ca_pem) in lines
    assert not [s for s in SECRETS.values() if s in lines]
    assert creds.redact("a job-Pw2 b st-Pw3") == "a [redacted] b [redacted]"
