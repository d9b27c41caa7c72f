"""Which settings authenticate a backfill's Spark for each kind of master
(backfill/authentication.py), and the masters refused at start for want of a secret. Spark
itself refusing a client without the secret: tests/integration/test_backfill_standalone.py and
test_backfill.py."""

from __future__ import annotations

import pytest

from framework import Computation, Pipeline
from framework.backfill.authentication import daemon_settings, driver_settings, new_secret
from framework.backfill.driver import backfill
from framework.errors import ConfigurationError


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "local[*, 4]"])
def test_a_local_driver_listens_on_loopback_and_authenticates_with_sparks_own_secret(master):
    assert driver_settings(master, {}) == {
        "spark.authenticate": "true",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }


@pytest.mark.parametrize("master", ["yarn", "k8s://https://10.0.0.1:6443"])
def test_yarn_and_kubernetes_make_the_secret_and_the_connections_are_encrypted(master):
    assert driver_settings(master, {}) == {
        "spark.authenticate": "true",
        "spark.network.crypto.enabled": "true",
    }


def test_a_standalone_master_takes_the_secret_from_the_spark_settings():
    conf = {"spark.authenticate.secret": "s3cret"}
    assert driver_settings("spark://10.0.0.1:7077", conf) == {
        "spark.authenticate": "true",
        "spark.network.crypto.enabled": "true",
    }


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "local-cluster[2,1,1024]"])
def test_a_master_whose_secret_nobody_gave_is_refused_in_one_line_naming_the_fix(master):
    with pytest.raises(ConfigurationError, match="needs the secret its cluster shares") as error:
        driver_settings(master, {})
    assert "spark.authenticate.secret" in str(error.value) and "\n" not in str(error.value)
    assert "[spark] of --config" in str(error.value)


def test_a_backfill_on_such_a_master_is_refused_before_kafka_is_asked(monkeypatch):
    def kafka(*args):
        raise AssertionError("Kafka was asked")

    monkeypatch.setattr("framework.backfill.driver.AdminClient", kafka)
    p = Pipeline("bf")
    p.computation("c", Noop, inputs={"clicks": None})
    with pytest.raises(ConfigurationError, match="spark://10.0.0.1:7077 needs the secret"):
        backfill(p, "c", bootstrap="127.0.0.1:1", master="spark://10.0.0.1:7077")


def test_the_users_own_settings_win():
    conf = {"spark.authenticate.secret": "s", "spark.network.crypto.enabled": "false"}
    assert driver_settings("spark://h:7077", conf) == {"spark.authenticate": "true"}
    assert driver_settings("local[2]", {"spark.driver.bindAddress": "0.0.0.0"}) == {
        "spark.authenticate": "true",
        "spark.driver.host": "127.0.0.1",
    }


@pytest.mark.parametrize("off", [False, "false", " False "])
def test_authentication_turned_off_asks_for_no_secret_and_keeps_a_local_driver_on_loopback(off):
    assert driver_settings("spark://h:7077", {"spark.authenticate": off}) == {}
    assert driver_settings("local[2]", {"spark.authenticate": off}) == {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }


def test_the_daemons_authenticate_encrypt_and_refuse_kills_from_their_pages():
    secret = new_secret()
    assert len(secret) == 64 and secret != new_secret()
    assert daemon_settings(secret) == {
        "spark.authenticate": "true",
        "spark.authenticate.secret": secret,
        "spark.network.crypto.enabled": "true",
        "spark.ui.killEnabled": "false",
    }
