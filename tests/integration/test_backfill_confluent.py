"""`logwheel backfill` over a topic in the Confluent wire format, on a real broker, a real
embedded registry and a real Spark (local mode): what another team's confluent-kafka
`AvroSerializer` wrote is backfilled exactly as `logwheel run` processes it (outputs that
confluent-kafka's `AvroDeserializer` reads, written with the id registered under
`<stream>-value`; the same bad records dead-lettered with the same reasons), with the
registry's URL reaching Spark's executors from the driver only; a registry that is down stops
the backfill before Spark runs, in one line naming its URL."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from framework.backfill.driver import backfill
from framework.backfill.session import session
from framework.errors import ConfigurationError
from framework.jvm.process import any_free_port
from framework.kafka.collector import ID_HEADER
from framework.kafka.schema_registry import REGISTRY_ENV
from framework.ops.reset import reset
from tests.integration.confluent_job import build
from tests.integration.test_confluent_format import THEIR_SCHEMA
from tests.support import UniqueJob, read_topic, wait_until_resettable

pytestmark = pytest.mark.timeout(900)
FACTORY = "tests.integration.confluent_job:build"
T0 = 1_700_000_000_000
WORDS = [("alpha", 1, "en"), ("beta", 2, "fr"), ("gamma", 3, "de"), ("delta", 4, "it")]


@pytest.fixture(scope="module")
def spark():
    spark = session("local[2,3]", "logwheel-test-backfill-confluent")
    yield spark
    spark.stop()


def _inputs(registry: str, topic: str) -> list[tuple[str, bytes]]:
    """(key, value): what another team's AvroSerializer writes, and among it an unknown schema
    id, a wrong magic byte and a truncated body."""
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(THEIR_SCHEMA))
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = [(w, serialize({"word": w, "count": c, "lang": lang}, ctx)) for w, c, lang in WORDS]
    unknown = b"\x00" + (987_654).to_bytes(4, "big") + good[0][1][5:]
    return [
        good[0],
        ("alpha", unknown),
        good[1],
        ("beta", b"\x01" + good[1][1][1:]),
        good[2],
        ("gamma", good[2][1][:-1]),
        good[3],
    ]


def _outputs(msgs: list, deserialize, topic: str) -> list[tuple]:
    ctx = SerializationContext(topic, MessageField.VALUE)
    return sorted(
        (
            m.key().decode(),
            json.dumps(deserialize(m.value(), ctx), sort_keys=True),
            int.from_bytes(m.value()[1:5], "big"),
            m.timestamp()[1],
            dict(m.headers() or ()).get(ID_HEADER),
        )
        for m in msgs
    )


def _dead_letters(msgs: list) -> list[tuple]:
    return sorted((m.key(), m.value(), sorted(m.headers() or ())) for m in msgs)


def test_backfill_over_a_wire_format_topic_equals_run(kafka, tmp_path, registry, spark,
                                                      monkeypatch):  # fmt: skip
    """`run` reads the topic; reset --wipe-state; the backfill reads it again: the same
    outputs (keys, values, schema ids, timestamps, ids) and the same dead letters."""
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "bfwire", registry)
    words, doubled = f"{job_def.prefix}words", f"{job_def.prefix}doubled"
    dlq = f"{job_def.name}.double.dlq"
    inputs = _inputs(registry, words)
    producer = Producer({"bootstrap.servers": kafka})
    for i, (key, value) in enumerate(inputs):
        producer.produce(words, value, key.encode(), timestamp=T0 + i)
    assert producer.flush(30) == 0
    job = job_def.job(computations=["double"]).start()
    try:
        streamed = read_topic(kafka, doubled, expect=len(WORDS), timeout=120)
        streamed_dead = read_topic(kafka, dlq, expect=3, timeout=60)
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    wait_until_resettable(job_def.pipeline, "double", kafka, tmp_path / "state-a")
    reset(job_def.pipeline, "double", "earliest", bootstrap=kafka, state_dir=tmp_path / "x",
          wipe_state=True)  # fmt: skip

    # the same job, its registry named by the environment of this process only: Spark's
    # executors (started before) learn it from the driver
    monkeypatch.setenv(REGISTRY_ENV, registry)
    summary = backfill(build(job_def.name, job_def.prefix, None), "double", bootstrap=kafka,
                       spark=spark)  # fmt: skip

    assert (summary.records_in, summary.records_out) == (len(inputs), len(WORDS))
    assert summary.dead_letters == 3
    client = SchemaRegistryClient({"url": registry})
    deserialize = AvroDeserializer(client)
    every = read_topic(kafka, doubled, expect=2 * len(WORDS), timeout=120)
    ran = _outputs(streamed, deserialize, doubled)
    assert len(every) == 2 * len(WORDS)
    assert _outputs(every, deserialize, doubled) == sorted(ran + ran)
    written = client.get_latest_version(f"{doubled}-value").schema_id
    assert {schema_id for _, _, schema_id, _, _ in ran} == {written}
    assert [json.loads(v) for _, v, _, _, _ in ran] == [
        {"word": w, "count": 2 * c} for w, c, _ in sorted(WORDS)
    ]
    dead = read_topic(kafka, dlq, expect=6, timeout=60)
    assert len(dead) == 6
    assert _dead_letters(dead) == sorted(_dead_letters(streamed_dead) * 2)
    stages = {dict(m.headers())["logwheel.error.stage"] for m in dead}
    assert stages == {b"decode"}


def test_a_registry_that_does_not_answer_stops_the_backfill_in_one_line(kafka, tmp_path, spark):
    nowhere = f"http://127.0.0.1:{any_free_port()}"
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "bfwiredown", nowhere)
    with pytest.raises(ConfigurationError) as refused:
        backfill(job_def.pipeline, "double", bootstrap=kafka, spark=spark)
    message = str(refused.value)
    assert "\n" not in message and nowhere in message and "does not answer" in message
