"""`[kafka]` client settings from --config: `${VAR}` references to the environment."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from framework.core.part import reader_group
from framework.errors import ConfigurationError
from framework.kafka.config import (
    consumer_config,
    expand_env,
    java_settings,
    producer_config,
)
from framework.kafka.errors import Unreachable
from framework.kafka.topic_ends import watermark_offsets
from framework.streaming.loading import kafka_settings, spark_settings


def test_a_transactional_producer_retries_a_refused_request_within_a_few_milliseconds():
    """A light input's commits follow each other closely enough to meet the last one's markers
    unwritten (CONCURRENT_TRANSACTIONS): the retry's first backoff adds to that commit's
    latency, and exactly-once's latency bar (issue 25) needs it small."""
    assert producer_config("b:9092", transactional_id="t")["retry.backoff.ms"] <= 2
    assert "retry.backoff.ms" not in producer_config("b:9092")  # librdkafka's default


def test_references_are_replaced_by_the_environment():
    env = {"PASS": "s3cr$t", "USER": "job"}
    settings = {"sasl.password": "${PASS}", "sasl.username": "x-${USER}-y", "linger.ms": 5}
    assert expand_env(settings, "here", env) == {
        "sasl.password": "s3cr$t",
        "sasl.username": "x-job-y",
        "linger.ms": 5,  # not a string: passed as it is
    }


def test_a_double_dollar_is_a_literal_dollar_and_a_lone_one_stays():
    env = {"A": "1"}
    assert expand_env({"k": "$${A} $A a$b ${A}"}, "here", env) == {"k": "${A} $A a$b 1"}


def test_a_missing_variable_fails_in_one_line_naming_it_and_the_setting():
    with pytest.raises(ConfigurationError) as error:
        expand_env({"sasl.password": "${NOT_SET_ANYWHERE}"}, "--config c.toml [kafka]", {})
    message = str(error.value)
    assert "\n" not in message
    assert "NOT_SET_ANYWHERE" in message and "sasl.password" in message
    assert message.startswith("--config c.toml [kafka]") and "export NOT_SET_ANYWHERE" in message


@pytest.mark.parametrize("value", ["${}", "${1X}", "${A-B}", "abc${UNCLOSED"])
def test_a_malformed_reference_fails_without_echoing_the_value(value):
    with pytest.raises(ConfigurationError) as error:
        expand_env({"sasl.password": f"hunter2{value}"}, "here", {"A": "x"})
    assert "hunter2" not in str(error.value)
    assert "sasl.password" in str(error.value)


def test_kafka_settings_expands_the_config_file(tmp_path, monkeypatch):
    config = tmp_path / "job.toml"
    config.write_text('[kafka]\n"sasl.username" = "job"\n"sasl.password" = "${LW_TEST_PW}"\n')
    monkeypatch.setenv("LW_TEST_PW", "the-password")
    assert kafka_settings(str(config)) == {"sasl.username": "job", "sasl.password": "the-password"}
    monkeypatch.delenv("LW_TEST_PW")
    with pytest.raises(ConfigurationError, match=r"\$\{LW_TEST_PW\}, which is not set"):
        kafka_settings(str(config))


def test_spark_settings_expand_references_as_kafka_settings_do(tmp_path, monkeypatch):
    config = tmp_path / "backfill.toml"
    config.write_text('[spark]\n"spark.ssl.keyStorePassword" = "${LW_TEST_KS}"\n')
    monkeypatch.setenv("LW_TEST_KS", "ks-secret")
    assert spark_settings(str(config)) == {"spark.ssl.keyStorePassword": "ks-secret"}
    monkeypatch.delenv("LW_TEST_KS")
    with pytest.raises(ConfigurationError, match=r"\[spark\]: spark.ssl.keyStorePassword"):
        spark_settings(str(config))


def test_an_assign_only_reader_sits_under_its_owners_prefix():
    group = reader_group("wordcount.count-words")
    assert group.startswith("wordcount.")
    assert consumer_config("b:1", reader=group)["group.id"] == group
    member = consumer_config("b:1", group="wordcount.count-words", reader=group)
    assert member["group.id"] == "wordcount.count-words"


def test_java_settings_turn_librdkafka_credentials_into_jaas_and_a_pem_trust_store():
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "job",
        "sasl.password": 'p"w\\d',
        "ssl.ca.location": "/ca.pem",
        "client.id": "x",
        "fetch.min.bytes": 1,
    }
    assert java_settings(settings) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="job" password="p\\"w\\\\d";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "client.id": "x",
        "fetch.min.bytes": "1",
    }


def test_java_settings_keep_what_is_given_for_java_and_refuse_what_cannot_map():
    given = {"sasl.mechanism": "PLAIN", "sasl.jaas.config": "X required;", "sasl.username": "u"}
    assert java_settings(given) == {"sasl.mechanism": "PLAIN", "sasl.jaas.config": "X required;"}
    with pytest.raises(ConfigurationError, match="sasl.jaas.config"):
        java_settings({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u"})
    assert java_settings({}) == {}


class _MovingLeader:
    """A consumer whose partition is between leaders for its first `moves` questions."""

    def __init__(self, moves: int, code: int = KafkaError.NOT_LEADER_FOR_PARTITION) -> None:
        self.moves, self.code = moves, code
        self.refreshed = 0

    def list_topics(self, topic, timeout):
        self.refreshed += 1

    def get_watermark_offsets(self, tp, timeout):
        if self.moves:
            self.moves -= 1
            raise KafkaException(KafkaError(self.code))
        return (0, 7)


def test_watermark_offsets_wait_out_a_moving_leader_and_nothing_else():
    tp = TopicPartition("t", 0)
    moving = _MovingLeader(2)
    assert watermark_offsets(moving, tp) == (0, 7)
    assert moving.refreshed == 2  # each failure asks for fresh metadata (leaders, partitions)
    with pytest.raises(KafkaException):
        watermark_offsets(_MovingLeader(1, KafkaError.TOPIC_AUTHORIZATION_FAILED), tp)
    with pytest.raises(Unreachable):
        watermark_offsets(_MovingLeader(1000), tp, timeout=0.3)


def test_watermark_offsets_give_up_a_client_whose_leader_epoch_stays_stale(monkeypatch):
    from framework.errors import Rejoin
    from framework.kafka import topic_ends

    monkeypatch.setattr(topic_ends, "STALE_EPOCH_S", 0.2)
    stale = _MovingLeader(1000, KafkaError.FENCED_LEADER_EPOCH)
    with pytest.raises(Rejoin, match="FENCED_LEADER_EPOCH"):
        watermark_offsets(stale, TopicPartition("t", 0), timeout=30)
    once = _MovingLeader(1, KafkaError.FENCED_LEADER_EPOCH)
    assert watermark_offsets(once, TopicPartition("t", 0)) == (0, 7)
