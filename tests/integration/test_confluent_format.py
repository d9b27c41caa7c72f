"""The Confluent wire format against a real Schema Registry and a real broker: a logwheel job
reads what confluent-kafka's own `AvroSerializer` wrote and writes what its `AvroDeserializer`
reads; records it cannot read (unknown schema id, wrong magic byte, truncated body, a hostile
writer schema that would exhaust memory, spin or crash fastavro) go to the dead-letter topic
with their reason while the rest flows; a registry that does not answer stops the start in one
line naming its URL.

The registry is the `registry` fixture's (tests/conftest.py): the module's own.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from framework.jvm.process import any_free_port
from framework.serde.confluent import frame
from tests.integration.registry_gate import registry_gate
from tests.support import UniqueJob, read_topic, wait_for

pytestmark = pytest.mark.timeout(600)
FACTORY = "tests.integration.confluent_job:build"

THEIR_SCHEMA = {  # the other team's version: one field more than the job's reader schema
    "type": "record",
    "name": "WordCount",
    "namespace": "wordcount",
    "fields": [
        {"name": "word", "type": "string"},
        {"name": "count", "type": "long"},
        {"name": "lang", "type": "string", "default": "en"},
    ],
}
WORDS = [("alpha", 1, "en"), ("beta", 2, "fr"), ("gamma", 3, "de")]


def _their_values(client: SchemaRegistryClient, topic: str) -> list[bytes]:
    """What another team's producer writes: confluent-kafka's AvroSerializer, its schema
    registered under `<topic>-value` by the serializer itself."""
    serialize = AvroSerializer(client, json.dumps(THEIR_SCHEMA))
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [serialize({"word": w, "count": c, "lang": lang}, ctx) for w, c, lang in WORDS]


def _send(kafka: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": kafka})
    for value in values:
        producer.produce(topic, value, value[-8:])
    producer.flush(30)


def test_a_job_reads_and_writes_what_confluent_kafkas_serializers_do(kafka, tmp_path, registry):
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "wire", registry)
    words, doubled = f"{job_def.prefix}words", f"{job_def.prefix}doubled"
    client = SchemaRegistryClient({"url": registry})
    _send(kafka, words, _their_values(client, words))
    job = job_def.job(computations=["double"]).start()
    try:
        out = read_topic(kafka, doubled, expect=len(WORDS), timeout=120)
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    deserialize = AvroDeserializer(client)  # the writer's schema, fetched by the id in each value
    ctx = SerializationContext(doubled, MessageField.VALUE)
    got = [deserialize(m.value(), ctx) for m in out]
    assert got == [{"word": w, "count": 2 * c} for w, c, _ in WORDS]
    assert {f"{words}-value", f"{doubled}-value"} <= set(client.get_subjects())
    written = client.get_latest_version(f"{doubled}-value")
    assert {int.from_bytes(m.value()[1:5], "big") for m in out} == {written.schema_id}
    fields = json.loads(written.schema.schema_str)["fields"]
    assert [f["name"] for f in fields] == ["word", "count"]  # the job's own schema
    assert read_topic(kafka, f"{job_def.name}.double.dlq", to_end=True) == []


ORDER = {  # another team's type, which the job's repository does not have
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "items", "type": {"type": "array", "items": "string"}},
    ],
}
ORDERS = [
    {"id": "o1", "amount": 9.5, "coupon": None, "items": ["tea"]},
    {"id": "o2", "amount": 20.25, "coupon": "SPRING", "items": ["cup", "pot"]},
]


def test_a_source_without_a_schema_is_read_as_confluents_serializer_wrote_it(
    kafka, tmp_path, registry
):
    """Finding 8 of issue 38: `pipeline.source("orders")` in a pipeline with a registry reads
    what confluent-kafka's own AvroSerializer wrote, each value a dict as written; a JSON
    source there says format="json" and stays JSON; a JSON output says so too."""
    job_def = UniqueJob(kafka, tmp_path, "tests.integration.confluent_job:build_as_written",
                        "aswritten", registry)  # fmt: skip
    orders, notes = f"{job_def.prefix}orders", f"{job_def.prefix}notes"
    client = SchemaRegistryClient({"url": registry})
    _send(kafka, orders, [_serialize(client, orders, ORDER, order) for order in ORDERS])
    _send(kafka, notes, [b'{"note":"hello","n":[1,2]}'])
    job = job_def.job(computations=["seen"]).start()
    try:
        out = read_topic(kafka, f"{job_def.prefix}seen", expect=3, timeout=120)
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    seen = sorted((json.loads(m.value()) for m in out), key=json.dumps)
    assert seen == sorted(
        [{"stream": orders, "value": order} for order in ORDERS]
        + [{"stream": notes, "value": {"note": "hello", "n": [1, 2]}}],
        key=json.dumps,
    )
    assert read_topic(kafka, f"{job_def.name}.seen.dlq", to_end=True) == []


def test_records_it_cannot_read_are_dead_lettered_with_their_reason(kafka, tmp_path, registry):
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "wirebad", registry)
    words = f"{job_def.prefix}words"
    good = _their_values(SchemaRegistryClient({"url": registry}), words)
    unknown = b"\x00" + (987_654).to_bytes(4, "big") + good[0][5:]
    bad_magic = b"\x01" + good[1][1:]
    truncated = good[2][:-1]
    _send(kafka, words, [good[0], unknown, good[1], bad_magic, truncated, good[2]])
    job = job_def.job(computations=["double"]).start()
    try:
        out = read_topic(kafka, f"{job_def.prefix}doubled", expect=3, timeout=120)
        dead = read_topic(kafka, f"{job_def.name}.double.dlq", expect=3, timeout=60)
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    assert len(out) == 3
    found = []
    for m in sorted(dead, key=lambda m: m.offset()):
        headers = dict(m.headers())
        found.append((headers["logwheel.error.stage"].decode(), headers["logwheel.error"].decode()))
    assert [m.value() for m in sorted(dead, key=lambda m: m.offset())] == [
        unknown,
        bad_magic,
        truncated,
    ]
    assert [stage for stage, _ in found] == ["decode"] * 3, found
    assert "unknown schema id 987654" in found[0][1] and registry in found[0][1], found[0]
    assert "wrong magic byte 0x01" in found[1][1], found[1]
    assert "truncated body" in found[2][1] and "schema id" in found[2][1], found[2]


def _serialize(client, topic: str, schema: dict, value: dict) -> bytes:
    """One value as confluent-kafka's AvroSerializer writes it for `topic` (registering
    `schema` under `<topic>-value`)."""
    serialize = AvroSerializer(client, json.dumps(schema))
    return serialize(value, SerializationContext(topic, MessageField.VALUE))


def test_an_id_the_registry_refuses_is_dead_lettered_with_its_words_and_the_rest_flows(
    kafka, tmp_path, registry
):
    """403 for one id (a subject this job may not read): that record is dead-lettered with the
    registry's words, once, and the partition goes on; 429 for another (the registry is busy)
    holds the partition at it until the registry serves it: nothing dead-lettered there."""
    with registry_gate(registry) as gate:
        job_def = UniqueJob(kafka, tmp_path, FACTORY, "wire403", gate.url)
        words, doubled = f"{job_def.prefix}words", f"{job_def.prefix}doubled"
        secret = f"{job_def.prefix}secret"
        client = SchemaRegistryClient({"url": registry})
        good = _their_values(client, words)
        denied = _serialize(
            client,
            secret,
            {**THEIR_SCHEMA, "fields": [*THEIR_SCHEMA["fields"], {"name": "pay", "type": "int"}]},
            {"word": "salary", "count": 9, "lang": "en", "pay": 100},
        )
        busy = _serialize(
            client,
            words,
            {
                **THEIR_SCHEMA,
                "fields": [*THEIR_SCHEMA["fields"], {"name": "n", "type": "int", "default": 0}],
            },
            {"word": "busy", "count": 5, "lang": "en", "n": 1},
        )
        denied_id, busy_id = (int.from_bytes(v[1:5], "big") for v in (denied, busy))
        gate.denied[denied_id] = f"{secret}-value"
        gate.throttled[busy_id] = 3  # the client's own retry, then one hold, then served
        _send(kafka, words, [good[0], denied, good[1], busy, denied, good[2]])
        job = job_def.job(computations=["double"]).start()
        try:
            out = read_topic(kafka, doubled, expect=4, timeout=120)
            dead = read_topic(kafka, f"{job_def.name}.double.dlq", expect=2, timeout=60)
            assert job.alive(), job.output()[-3000:]
        finally:
            assert job.stop() == 0, job.output()[-3000:]
    deserialize = AvroDeserializer(client)
    ctx = SerializationContext(doubled, MessageField.VALUE)
    assert [deserialize(m.value(), ctx)["word"] for m in out] == ["alpha", "beta", "busy", "gamma"]
    assert [m.value() for m in dead] == [denied, denied]
    for m in dead:
        headers = dict(m.headers())
        reason = headers["logwheel.error"].decode()
        assert headers["logwheel.error.stage"] == b"decode"
        assert f"schema id {denied_id}" in reason and "HTTP 403" in reason, reason
        assert f"User is denied operation Read on Subject: {secret}-value" in reason, reason
    assert gate.asked[denied_id] == 1  # the refusal is remembered: asked once for both
    log = job.output()
    assert log.count("Too many requests") == 1 and log.count("answers again") == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


NODE = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
HUGE = b"\x80\x80\x80\x80\x80\x40"  # the block count 2**40, as Avro writes a long
ZERO_WIDTH = "refused: its array items (null) take no bytes, so a block count could claim any"
TOO_DEEP = "values nested deeper than 100"
TOO_MANY = (
    "a block of 1099511627776 array items (each at least 1 bytes) cannot fit in the 1 bytes left"
)


def _with(field: dict) -> dict:
    """wordcount.WordCount as a writer with one more field: one its readers skip."""
    return {**THEIR_SCHEMA, "fields": [*THEIR_SCHEMA["fields"][:2], field]}


def test_hostile_writer_schemas_are_dead_lettered_and_the_job_stays_up(kafka, tmp_path, registry):
    """Issue 38, finding 1: a valid writer schema in the registry and a tiny body. As written,
    2**40 nulls grew memory until the process was killed, and a list 5,000 deep crashed it in
    C (exit 139); skipped by resolution to wordcount.WordCount, a block count spun the CPU, and
    the deep list crashed it too. Each is now a dead letter with its reason, the job alive, and
    every other record counted exactly once."""
    job_def = UniqueJob(kafka, tmp_path, f"{FACTORY}_both_ways", "wirehostile", registry)
    words, anything = f"{job_def.prefix}words", f"{job_def.prefix}anything"
    client = SchemaRegistryClient({"url": registry})

    def register(n: int, schema: dict) -> int:
        subject = f"{job_def.prefix}hostile-{n}-value"
        return client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))

    bomb = register(1, {"type": "array", "items": "null"})
    deep = register(2, NODE)
    spin_null = register(3, _with({"name": "junk", "type": {"type": "array", "items": "null"}}))
    spin = register(4, _with({"name": "junk", "type": {"type": "array", "items": "boolean"}}))
    deep_skip = register(5, _with({"name": "next", "type": ["null", NODE]}))
    word = b"\x02a\x02"  # {"word": "a", "count": 1}
    list_5000 = b"\x02" * 5000 + b"\x00"
    hostile = [  # (topic, value, the dead letter's reason)
        (anything, frame(bomb, HUGE + b"\x00"), f"writer schema id {bomb} {ZERO_WIDTH}"),
        (anything, frame(deep, list_5000), f"{TOO_DEEP} (writer schema id {deep})"),
        (
            words,
            frame(spin_null, word + HUGE + b"\x00"),
            f"writer schema id {spin_null} {ZERO_WIDTH}",
        ),
        (words, frame(spin, word + HUGE + b"\x00"), f"{TOO_MANY} (writer schema id {spin})"),
        (words, frame(deep_skip, word + list_5000), f"{TOO_DEEP} (writer schema id {deep_skip})"),
    ]
    good = {topic: _their_values(client, topic) for topic in (words, anything)}
    for topic in (words, anything):  # each hostile record with a good one after it
        bad, fine = [value for t, value, _ in hostile if t == topic], good[topic]
        _send(kafka, topic, [fine[0], bad[0], fine[1], *bad[1:], fine[2]])
    job = job_def.job(computations=["double"]).start()
    try:
        out = read_topic(kafka, f"{job_def.prefix}doubled", expect=6, timeout=120, to_end=True)
        dead = read_topic(kafka, f"{job_def.name}.double.dlq", expect=5, timeout=60, to_end=True)
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    deserialize = AvroDeserializer(client)
    ctx = SerializationContext(f"{job_def.prefix}doubled", MessageField.VALUE)
    counted = sorted((v["word"], v["count"]) for v in (deserialize(m.value(), ctx) for m in out))
    assert counted == sorted([(w, 2 * c) for w, c, _ in WORDS] * 2)
    found = {}
    for m in dead:
        headers = dict(m.headers())
        assert headers["logwheel.error.stage"] == b"decode", headers
        found[(headers["logwheel.source.topic"].decode(), m.value())] = headers[
            "logwheel.error"
        ].decode()
    assert found.keys() == {(topic, value) for topic, value, _ in hostile}
    for topic, value, reason in hostile:
        assert reason in found[(topic, value)], (reason, found[(topic, value)])


def test_a_registry_that_does_not_answer_stops_the_start_in_one_line(kafka, tmp_path):
    nowhere = f"http://127.0.0.1:{any_free_port()}"
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "wiredown", nowhere)
    job = job_def.job(computations=["double"]).start()
    wait_for(lambda: not job.alive(), 90, what="the job to refuse to start")
    assert job.proc.returncode == 1, job.output()[-3000:]
    last = job.output().strip().splitlines()[-1]
    assert nowhere in last and "does not answer" in last, job.output()[-3000:]


def test_the_registry_its_auth_and_subject_strategy_come_from_the_config_file(
    kafka, tmp_path, registry
):
    """No registry in the code: `[registry]` in --config names it (its URL from the
    environment through `${VAR}`) and the subject strategy writers register under."""
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "wirecfg", None)
    words, doubled = f"{job_def.prefix}words", f"{job_def.prefix}doubled"
    client = SchemaRegistryClient({"url": registry})
    _send(kafka, words, _their_values(client, words))
    config = tmp_path / "job.toml"
    config.write_text(
        '[registry]\nurl = "${JOB_REGISTRY}"\nsubject_name_strategy = "topic_record"\n'
        '"max.retries" = 3\n'
    )
    job = job_def.job(computations=["double"], config=config, env={"JOB_REGISTRY": registry})
    job.env.pop("LOGWHEEL_SCHEMA_REGISTRY", None)
    job.start()
    try:
        out = read_topic(kafka, doubled, expect=len(WORDS), timeout=120)
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    deserialize = AvroDeserializer(client)
    ctx = SerializationContext(doubled, MessageField.VALUE)
    assert [deserialize(m.value(), ctx) for m in out] == [
        {"word": w, "count": 2 * c} for w, c, _ in WORDS
    ]
    subjects = set(client.get_subjects())
    assert f"{doubled}-wordcount.WordCount" in subjects  # TopicRecordNameStrategy
    assert f"{doubled}-value" not in subjects


def test_an_unknown_registry_setting_stops_the_start_in_one_line(kafka, tmp_path, registry):
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "wirekey", registry)
    config = tmp_path / "job.toml"
    config.write_text('[registry]\n"basic.auth.pasword" = "hunter2"\n')
    job = job_def.job(computations=["double"], config=config).start()
    wait_for(lambda: not job.alive(), 90, what="the job to refuse to start")
    assert job.proc.returncode == 1, job.output()[-3000:]
    last = job.output().strip().splitlines()[-1]
    assert "unknown key 'basic.auth.pasword'" in last and "basic.auth.user.info" in last, last
    assert "hunter2" not in job.output()


@pytest.mark.parametrize(
    ("code", "file", "says"),
    [  # the code names another origin than the file whose credentials these are
        ("registry", "http://localhost:{port}", "names another registry than [registry] url"),
        (None, "http://registry.example:8081", "would cross the network in clear"),
    ],
    ids=["another-origin", "plain-http"],
)
def test_registry_credentials_for_another_origin_or_in_clear_stop_the_start_in_one_line(
    kafka, tmp_path, registry, code, file, says
):
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "wirecred", registry if code else None)
    config = tmp_path / "job.toml"
    url = file.format(port=registry.rsplit(":", 1)[1])
    config.write_text(f'[registry]\nurl = "{url}"\n"basic.auth.user.info" = "team:hunter2"\n')
    job = job_def.job(computations=["double"], config=config)
    job.env.pop("LOGWHEEL_SCHEMA_REGISTRY", None)
    job.start()
    wait_for(lambda: not job.alive(), 90, what="the job to refuse to start")
    assert job.proc.returncode == 1, job.output()[-3000:]
    last = job.output().strip().splitlines()[-1]
    assert says in last and "basic.auth.user.info" in last, job.output()[-3000:]
    assert "hunter2" not in job.output()
