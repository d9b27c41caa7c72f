"""Invariant 7 on a real broker: every way a record can be bad, on the way in or out, ends in
the dead-letter topic with its stage and reason, and the records around it flow. Each case
was a crash or an endless abort loop before (issue "Runtime hardening")."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.support import UniqueJob, produce, read_topic, wait_for

pytestmark = pytest.mark.timeout(600)
FACTORY = "tests.integration.bad_records_job:build"


def send(kafka: str, topic: str, *values: dict, key: bytes = b"k") -> None:
    producer = Producer({"bootstrap.servers": kafka})
    for value in values:
        producer.produce(topic, json.dumps(value).encode(), key)
    producer.flush(30)


def set_max_bytes(kafka: str, topic: str, limit: int) -> None:
    entry = ConfigEntry(
        "max.message.bytes", str(limit), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": kafka})
    admin.incremental_alter_configs([resource])[resource].result(30)
    # The controller has the change; the broker applies it from the metadata log a moment
    # later (under load, after the next production had passed the old limit). It answers
    # DescribeConfigs from what it applied.
    plain = ConfigResource(ConfigResource.Type.TOPIC, topic)

    def applied() -> bool:
        configs = admin.describe_configs([plain])[plain].result(30)
        return configs["max.message.bytes"].value == str(limit)

    wait_for(applied, timeout=30, what=f"max.message.bytes={limit} on {topic}")


def stages(kafka: str, dlq: str, expect: int) -> list[tuple[str, str]]:
    dead = read_topic(kafka, dlq, expect=expect, timeout=90)
    out = []
    for m in sorted(dead, key=lambda m: m.offset()):
        h = dict(m.headers())
        out.append((h["logwheel.error.stage"].decode(), h["logwheel.error"].decode()))
    return out


def oks(kafka: str, topic: str, expect: int) -> list[dict]:
    values = [json.loads(m.value()) for m in read_topic(kafka, topic, expect=expect, timeout=90)]
    return sorted(values, key=lambda v: v.get("ok", -1))


def test_bad_input_and_output_go_to_the_dead_letter_topic(kafka, tmp_path):
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "bad")
    out, dlq = f"{job_def.prefix}out", f"{job_def.name}.echo.dlq"
    set_max_bytes(kafka, out, 20_000)  # read by the job at start
    inp = f"{job_def.prefix}in"
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(inp, json.dumps({"ok": 0}).encode(), b"k")
    producer.produce(inp, json.dumps({"ok": -1}).encode(), b"\xff\xfe not utf-8")
    producer.flush(30)
    send(
        kafka,
        inp,
        {"ok": 1},
        {"emit": "future"},
        {"ok": 2},
        {"emit": "big", "size": 50_000},
        {"ok": 3},
        {"state": "set"},
        {"ok": 4},
        {"emit": "half"},
        {"ok": 5},
    )
    job = job_def.job(computations=["echo"]).start()
    try:
        got = oks(kafka, out, 6)
        assert [v["ok"] for v in got] == [0, 1, 2, 3, 4, 5]
        assert [v["n"] for v in got] == [1, 2, 3, 4, 5, 6], "state changes of failed calls leaked"
        found = stages(kafka, dlq, 5)
        assert [s for s, _ in found] == ["decode", "produce", "produce", "state", "encode"], found
        assert "UnicodeDecodeError" in found[0][1]
        assert "outside" in found[1][1] and "window" in found[1][1]
        assert "max.message.bytes" in found[2][1]
        assert "cannot be stored" in found[3][1]
        assert "avro-out" in found[4][1]
        # The limit shrinks under the running job: the broker refuses what the job thought
        # fine. The job reads the limits again, the offending call is dead-lettered, the
        # others commit, nothing loops.
        set_max_bytes(kafka, out, 2_000)
        send(kafka, inp, {"ok": 6}, {"emit": "big", "size": 6_000}, {"ok": 7})
        found = stages(kafka, dlq, 6)
        assert found[5][0] == "produce" and "over its limit of 2000" in found[5][1], found[5]
        got = oks(kafka, out, 8)
        assert [v["ok"] for v in got] == [0, 1, 2, 3, 4, 5, 6, 7]
        assert "half" not in {k for v in got for k in v}, "a failed call's production committed"
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]


def test_a_key_extractor_that_returns_no_str_is_a_dead_letter(kafka, tmp_path):
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "badkey")
    keyed = f"{job_def.prefix}keyed"
    produce(
        kafka, keyed, [(None, {"k": "a"}, None), (None, {"no": 1}, None), (None, {"k": "b"}, None)]
    )
    job = job_def.job(computations=["rekeyed"]).start()
    try:
        got = read_topic(kafka, f"{job_def.prefix}rekeyed-out", expect=2, timeout=90)
        assert sorted(json.loads(m.value())["key"] for m in got) == ["a", "b"]
        found = stages(kafka, f"{job_def.name}.rekeyed.dlq", 1)
        assert found[0][0] == "key" and "returned NoneType, not str" in found[0][1]
    finally:
        job.stop()


@pytest.mark.parametrize("policy", ["skip", "stop"])
def test_error_policies(kafka, tmp_path, policy):
    job_def = UniqueJob(kafka, tmp_path, FACTORY, f"pol-{policy}", policy)
    inp = f"{job_def.prefix}in"
    send(kafka, inp, {"ok": 0}, {"state": "set"}, {"ok": 1})
    job = job_def.job(computations=["echo"]).start()
    try:
        if policy == "stop":
            wait_for(lambda: not job.alive(), 90, what="the job to stop on the bad record")
            assert job.proc.returncode == 1
            assert "on_error='stop'" in job.output() and "'state'" in job.output()
        else:
            got = oks(kafka, f"{job_def.prefix}out", 2)
            assert [v["ok"] for v in got] == [0, 1]
            # committed before ok 1's output, if it were there
            assert read_topic(kafka, f"{job_def.name}.echo.dlq", to_end=True) == []
    finally:
        job.stop()
