"""A Schema Registry that goes away while a job runs (issue 22): the job holds the partition at
the first record whose schema id it has not seen, retries with backoff, and goes on once the
registry is back — nothing dead-lettered, skipped, lost or written twice (read_committed), the
process up and its group membership untouched; the ids survive the registry's restart, so
records written before it still decode.

The registry is a real one of this test's own (`registry_server` in tests/conftest.py),
SIGKILLed and started again on the same home and port; the broker is the real test broker.
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from framework.jvm.process import wait_exit
from tests.conftest import registry_server
from tests.integration.test_metrics import scrape
from tests.integration.test_metrics import value as metric
from tests.support import UniqueJob, read_topic, wait_for

pytestmark = pytest.mark.timeout(900)
FACTORIES = {  # the input kept by its Kafka key, or re-keyed (decoded first by the repartition)
    "kept": "tests.integration.confluent_job:build",
    "rekeyed": "tests.integration.confluent_job:build_rekeyed",
}

V1 = {
    "type": "record",
    "name": "WordCount",
    "namespace": "wordcount",
    "fields": [{"name": "word", "type": "string"}, {"name": "count", "type": "long"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "lang", "type": "string", "default": "en"}]}


def _values(client, topic: str, schema: dict, words: list[tuple[str, int]]) -> list[bytes]:
    """What the other team's producer writes with confluent-kafka's AvroSerializer."""
    serialize = AvroSerializer(client, json.dumps(schema))
    ctx = SerializationContext(topic, MessageField.VALUE)
    extra = {"lang": "fr"} if len(schema["fields"]) == 3 else {}
    return [serialize({"word": w, "count": c, **extra}, ctx) for w, c in words]


def _send(kafka: str, topic: str, words: list[tuple[str, int]], values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": kafka})
    for (word, _), value in zip(words, values, strict=True):
        producer.produce(topic, value, word.encode())
    producer.flush(30)


def _held(port: int) -> float | None:
    samples = scrape(port)
    return metric(samples, "logwheel_held_partitions") if samples else None


def _decoded(url: str, out: list) -> list[tuple[str, int]]:
    """The job's output as (word, count), decoded with the ids its values carry."""
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": url}))
    got = []
    for m in out:
        value = deserialize(m.value(), SerializationContext(m.topic(), MessageField.VALUE))
        got.append((value["word"], value["count"]))
    return got


@pytest.mark.parametrize("input_", FACTORIES)
def test_a_registry_away_mid_run_holds_the_record_and_loses_nothing(kafka, tmp_path, input_):
    with registry_server(tmp_path / "registry") as server:
        url = server.url()
        job_def = UniqueJob(kafka, tmp_path, FACTORIES[input_], "outage", url)
        words, doubled = f"{job_def.prefix}words", f"{job_def.prefix}doubled"
        client = SchemaRegistryClient({"url": url})

        before = [("a1", 1), ("a2", 2), ("a3", 3)]
        _send(kafka, words, before, _values(client, words, V1, before))
        job = job_def.job(computations=["double"])
        job.args += ["--metrics-port", "0"]
        job.start()
        read_topic(kafka, doubled, expect=3, timeout=180)  # the job has seen the v1 id

        # The other team registers v2 and serializes with it while the registry is up ...
        v2_id = client.register_schema(f"{words}-value", Schema(json.dumps(V2), "AVRO"))
        down_v1a, down_v2a = [("b1", 4), ("b2", 5)], [("c1", 6)]
        down_v1b, down_v2b = [("b3", 7)], [("c2", 8)]
        batches = [
            (down_v1a, _values(client, words, V1, down_v1a)),
            (down_v2a, _values(client, words, V2, down_v2a)),
            (down_v1b, _values(client, words, V1, down_v1b)),
            (down_v2b, _values(client, words, V2, down_v2b)),
        ]
        assert {int.from_bytes(batches[1][1][0][1:5], "big")} == {v2_id}
        # ... then the registry dies, and v1 and v2 records come in while it is away.
        pid = server.running_pid()
        os.kill(pid, signal.SIGKILL)
        wait_exit(pid, 30)
        for batch_words, values in batches:
            _send(kafka, words, batch_words, values)

        wait_for(
            lambda: "does not answer" in job.output(), 120, what="the job to hold the v2 record"
        )
        held = read_topic(kafka, doubled, timeout=30, idle=5)  # what went on before it
        keys = sorted(m.key().decode() for m in held)  # the output's key is the word
        assert keys == ["a1", "a2", "a3", "b1", "b2"], keys
        assert job.alive(), job.output()[-3000:]
        port = int(re.search(r"metrics on http://127\.0\.0\.1:(\d+)/", job.output()).group(1))
        assert wait_for(lambda: _held(port) == 1, 30, what="logwheel_held_partitions 1")

        server.start(say=lambda _: None)  # same home, same port: the ids are kept
        assert server.url() == url
        expected = before + down_v1a + down_v2a + down_v1b + down_v2b
        read_topic(kafka, doubled, expect=len(expected), timeout=240)
        assert wait_for(lambda: _held(port) == 0, 30, what="logwheel_held_partitions 0")
        assert metric(scrape(port), "logwheel_hold_retries_total") >= 1
        try:
            assert job.alive(), job.output()[-3000:]
        finally:
            assert job.stop() == 0, job.output()[-3000:]

        out = read_topic(kafka, doubled, to_end=True)  # all it ever wrote: nothing more
        assert sorted(_decoded(url, out)) == sorted((w, 2 * c) for w, c in expected)  # each once
        assert read_topic(kafka, f"{job_def.name}.double.dlq", to_end=True) == []
        # records written before the restart decode with the ids they carry
        inputs = read_topic(kafka, words, expect=len(expected), timeout=60)
        deserialize = AvroDeserializer(SchemaRegistryClient({"url": url}))
        ctx = SerializationContext(words, MessageField.VALUE)
        assert [deserialize(m.value(), ctx)["word"] for m in inputs] == [w for w, _ in expected]

        log = job.output()
        assert log.count("does not answer") == 1, log[-5000:]  # once per outage
        assert log.count("answers again") == 1, log[-5000:]
        assert url in log.split("does not answer")[0].splitlines()[-1]
        assert "rejoining the group" not in log, log[-5000:]  # the membership stayed
        assert log.count(f"{job_def.name}.double: assigned") == 1, log[-5000:]
        assert "Traceback" not in log, log[-5000:]
