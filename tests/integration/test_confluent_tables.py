"""Tables over another team's topic in the Confluent wire format, against a real Schema
Registry and a real broker: a logwheel job (exactly_once) joins a stream against a compacted
topic written by confluent-kafka's own `AvroSerializer`, across the team's schema change (v2
adds a field with a default) and a SIGKILL, each input joined once with the table as of its
processing; a registry away mid-run loses no row and dead-letters nothing; `logwheel
changelog dump|follow`, `ChangelogTable(registry=URL)` and a Spark snapshot give the team's
values.

The registry is the `registry` fixture's (tests/conftest.py), the module's own; the job reads
its `team.Profile` reader schema from a directory of the test's (LOGWHEEL_SCHEMAS).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from changelog import ChangelogTable
from framework.jvm.process import any_free_port
from framework.kafka.schema_registry import (
    REGISTRY_ENV,
    RegistryConfigurationError,
    RegistryUnavailable,
)
from framework.kafka.topics import create_topics as create_pipeline_topics
from framework.serde.codecs import DecodeError
from tests.conftest import create_topics, registry_server
from tests.integration.confluent_tables_job import PROFILE
from tests.support import REPO, UniqueJob, produce, read_topic, unique_name, wait_for

pytestmark = pytest.mark.timeout(900)
FACTORY = "tests.integration.confluent_tables_job:build"
V1 = {
    "type": "record",
    "name": "Profile",
    "namespace": "team",
    "fields": [{"name": "user", "type": "string"}, {"name": "tier", "type": "string"}],
}
V2 = PROFILE  # adds region, default "unknown"
USERS = [f"u{i}" for i in range(12)]


class Team:
    """Another team's producer: confluent-kafka's AvroSerializer (which registers its schema
    under `<topic>-value`), keys partitioned by murmur2 as Java's producers do."""

    def __init__(self, kafka: str, registry: str, topic: str) -> None:
        self.topic = topic
        self.client = SchemaRegistryClient({"url": registry})
        self.producer = Producer(
            {
                "bootstrap.servers": kafka,
                "partitioner": "murmur2_random",
                "enable.idempotence": True,
            }
        )

    def write(self, schema: dict, rows: dict[str, dict | None]) -> None:
        serialize = AvroSerializer(self.client, json.dumps(schema))
        ctx = SerializationContext(self.topic, MessageField.VALUE)
        for user, row in rows.items():
            value = None if row is None else serialize(row, ctx)
            self.producer.produce(self.topic, value, user.encode())
        assert self.producer.flush(30) == 0


def _join_job(kafka, tmp_path, registry, prefix):
    """The join job under a fresh name, the team's compacted topic created as theirs would be
    (2 partitions, like the job), the job's reader schema in a directory of its own."""
    job_def = UniqueJob(kafka, tmp_path, FACTORY, prefix, registry, create=False)
    profiles = f"{job_def.prefix}profiles"
    create_topics(kafka, [profiles], 2, {"cleanup.policy": "compact"})
    create_pipeline_topics(kafka, job_def.pipeline)
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "team.Profile.avsc").write_text(json.dumps(PROFILE))
    return job_def, profiles, {"LOGWHEEL_SCHEMAS": str(schemas)}


def _views(kafka: str, topic: str, ids: range, prefix: str) -> dict[str, str]:
    """Views `<prefix><i>` of user USERS[i % 12], keyed by user; returns id -> user."""
    sent = {f"{prefix}{i}": USERS[i % len(USERS)] for i in ids}
    produce(kafka, topic, [(user, {"id": id_}, None) for id_, user in sent.items()])
    return sent


def _joined(kafka: str, topic: str, expect: int) -> list[dict]:
    """The committed joined records, once `expect` have come, read on to the end: any
    duplicate committed by then too."""
    msgs = read_topic(kafka, topic, expect=expect, timeout=240, to_end=True)
    return [json.loads(m.value()) for m in msgs]


def test_a_join_against_their_table_across_its_schema_change_and_a_sigkill_is_exact(
    kafka, tmp_path, registry
):
    job_def, profiles, env = _join_job(kafka, tmp_path, registry, "wiretable")
    views, joined = f"{job_def.prefix}views", f"{job_def.prefix}joined"
    team = Team(kafka, registry, profiles)
    team.write(V1, {u: {"user": u, "tier": f"gold-{u}"} for u in USERS})
    want: dict[str, tuple] = {}
    job = job_def.job(env=env).start().wait_working(timeout=180)
    try:
        # batch a: the table holds v1 rows only; the reader's default fills region in
        for id_, user in _views(kafka, views, range(24), "a").items():
            want[id_] = (f"gold-{user}", "unknown")
        read_topic(kafka, joined, expect=24, timeout=240)
        # mid-run their schema evolves: v2 rows for half the users, one user deleted; every
        # view after this is written once these rows are acknowledged, so it must see them
        evolved = {u: {"user": u, "tier": f"platinum-{u}", "region": f"r-{u}"} for u in USERS[:6]}
        team.write(V2, {**evolved, USERS[-1]: None})

        def expect_after_v2(sent: dict[str, str]) -> None:
            for id_, user in sent.items():
                row = evolved.get(user)
                if user == USERS[-1]:
                    want[id_] = (None, None)
                elif row is not None:
                    want[id_] = (row["tier"], row["region"])
                else:
                    want[id_] = (f"gold-{user}", "unknown")

        restarted = threading.Event()

        def keep_viewing() -> None:  # until 20 batches after the restart
            first, after = 0, 0
            while after < 20:
                expect_after_v2(_views(kafka, views, range(first, first + 10), "b"))
                first, after = first + 10, after + restarted.is_set()
                time.sleep(0.1)

        flowing = threading.Thread(target=keep_viewing)
        flowing.start()
        try:
            read_topic(kafka, joined, expect=24 + 40, timeout=240)
            job.kill()  # SIGKILL while views flow: its open transaction is aborted
            job.start().wait_working(timeout=180)
        finally:
            restarted.set()
            flowing.join()
        got = _joined(kafka, joined, len(want))
        assert job.alive(), job.output()[-3000:]
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    ids = collections.Counter(v["id"] for v in got)
    assert [i for i, n in ids.items() if n > 1] == [], "duplicates"
    assert set(ids) == set(want), f"missing {sorted(set(want) - set(ids))[:10]}"
    assert {v["id"]: (v["tier"], v["region"]) for v in got} == want
    assert read_topic(kafka, f"{job_def.name}.join.dlq", to_end=True) == []
    # the table holds values of both versions, each under the id the team's serializer got
    versions = team.client.get_versions(f"{profiles}-value")
    rows = read_topic(kafka, profiles, to_end=True)
    ids_written = {int.from_bytes(m.value()[1:5], "big") for m in rows if m.value() is not None}
    assert len(versions) == 2 and len(ids_written) == 2


def test_a_registry_away_mid_run_loses_no_table_row_and_dead_letters_nothing(kafka, tmp_path):
    """A row written under a schema id the job has not seen yet is read while the registry is
    down: the hook's record waits (its partition held, the job stays in its group) and is
    joined once it is back."""
    with registry_server(tmp_path / "own-registry") as server:
        url = server.url()
        job_def, profiles, env = _join_job(kafka, tmp_path, url, "wireaway")
        views, joined = f"{job_def.prefix}views", f"{job_def.prefix}joined"
        team = Team(kafka, url, profiles)
        team.write(V1, {u: {"user": u, "tier": f"gold-{u}"} for u in USERS})
        job = job_def.job(env=env).start().wait_working(timeout=180)
        try:
            sent = _views(kafka, views, range(12), "a")
            read_topic(kafka, joined, expect=12, timeout=240)
            team.write(V2, {u: {"user": u, "tier": f"new-{u}", "region": "eu"} for u in USERS})
            server.stop()
            sent_b = _views(kafka, views, range(24), "b")
            wait_for(lambda: _held(job.output()), 120, what="a partition held for the registry")
            assert len(read_topic(kafka, joined, timeout=10, idle=5)) == 12
            server.start(say=lambda _: None)
            got = _joined(kafka, joined, 12 + 24)
            assert job.alive(), job.output()[-3000:]
            assert "rejoining the group" not in job.output()
        finally:
            assert job.stop() == 0, job.output()[-3000:]
    want = {i: (f"gold-{u}", "unknown") for i, u in sent.items()}
    want.update({i: (f"new-{u}", "eu") for i, u in sent_b.items()})
    assert sorted(v["id"] for v in got) == sorted(want)
    assert {v["id"]: (v["tier"], v["region"]) for v in got} == want
    assert read_topic(kafka, f"{job_def.name}.join.dlq", to_end=True) == []


def _held(log: str) -> bool:
    return any("does not answer" in line and "holding" in line for line in log.splitlines())


def _their_changelog(kafka: str, registry: str, create_topic) -> tuple[str, Team, dict]:
    """A compacted topic of theirs: v1 rows, then v2 rows and a tombstone; the latest value
    per key as each writer wrote it (the reader is the writer)."""
    topic = create_topic(partitions=2, config={"cleanup.policy": "compact"}, prefix="theirs")
    team = Team(kafka, registry, topic)
    team.write(V1, {u: {"user": u, "tier": "gold"} for u in USERS[:4]})
    team.write(V2, {"u0": {"user": "u0", "tier": "platinum", "region": "eu"}, "u3": None})
    latest = {"u0": {"user": "u0", "tier": "platinum", "region": "eu"}}
    latest.update({u: {"user": u, "tier": "gold"} for u in ("u1", "u2")})
    return topic, team, latest


def test_changelog_dump_prints_their_wire_format_values_as_json_lines(
    kafka, registry, create_topic
):
    topic, _, latest = _their_changelog(kafka, registry, create_topic)
    args = [sys.executable, "-m", "framework.cli", "changelog", "dump", topic, "--bootstrap", kafka]
    env = {k: v for k, v in os.environ.items() if k != REGISTRY_ENV}
    done = subprocess.run([*args, "--registry", registry], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert {line["key"]: line["value"] for line in lines} == latest and len(lines) == 3
    # without a registry nothing reads the wire format: today's JSON decoding refuses it
    bare = subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, timeout=180)
    assert bare.returncode != 0 and "DecodeError" in bare.stderr, bare.stderr[-3000:]


def test_changelog_follow_prints_their_changes_with_the_registry_from_the_environment(
    kafka, registry, create_topic
):
    topic, team, _ = _their_changelog(kafka, registry, create_topic)
    args = [sys.executable, "-m", "framework.cli", "changelog", "follow", topic]
    follow = subprocess.Popen(  # noqa: S603
        [*args, "--bootstrap", kafka],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, REGISTRY_ENV: registry},
        cwd=REPO,
    )
    lines: list[dict] = []

    def read() -> None:
        for line in follow.stdout:
            lines.append(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    try:
        row = {"user": "u1", "tier": "tin", "region": "us"}

        def changed() -> bool:
            team.write(V2, {"u1": row})  # again until the follower, caught up, prints it
            return any(line["new"] == row for line in lines)

        wait_for(changed, 120, interval=2, what="the follower to print the change")
    finally:
        follow.terminate()
        follow.wait(30)
    first = next(line for line in lines if line["new"] == row)
    assert first["key"] == "u1" and first["old"] in ({"user": "u1", "tier": "gold"}, row)


def test_changelog_table_with_a_registry_gives_their_values(
    kafka, registry, create_topic, monkeypatch
):
    topic, _, latest = _their_changelog(kafka, registry, create_topic)
    with ChangelogTable(topic, bootstrap=kafka, registry=registry) as table:
        table.catch_up(progress=False)
        assert dict(table.items()) == latest
        assert table.get("u0")["region"] == "eu" and "u3" not in table
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    with ChangelogTable(topic, bootstrap=kafka) as bare, pytest.raises(DecodeError):
        bare.catch_up(progress=False)


def test_changelog_table_names_a_registry_that_does_not_answer(kafka):
    nowhere = f"http://127.0.0.1:{any_free_port()}"
    with pytest.raises(RegistryConfigurationError, match=f"{nowhere} does not answer"):
        ChangelogTable(unique_name("theirs"), bootstrap=kafka, registry=nowhere)


def test_a_spark_snapshot_with_a_registry_gives_their_values(kafka, registry, create_topic):
    from changelog.spark import read_snapshot
    from framework.backfill.session import session

    topic, _, latest = _their_changelog(kafka, registry, create_topic)
    spark = session("local[1]", "logwheel-test-wire-snapshot")
    try:
        rows = read_snapshot(spark, topic, bootstrap=kafka, registry=registry).collect()
    finally:
        spark.stop()
    assert {r["key"]: json.loads(r["value"]) for r in rows} == latest


@pytest.mark.parametrize("in_rocksdb", [False, True])
def test_a_changelog_table_whose_registry_goes_away_loses_no_row(
    kafka, tmp_path, create_topic, in_rocksdb
):
    with registry_server(tmp_path / "own-registry") as server:
        topic, _, latest = _their_changelog(kafka, server.url(), create_topic)
        path = tmp_path / "rows" if in_rocksdb else None
        with ChangelogTable(topic, bootstrap=kafka, registry=server.url(), path=path) as table:
            server.stop()  # the table has seen no schema id yet
            with pytest.raises(RegistryUnavailable, match="does not answer"):
                table.catch_up(progress=False)
            server.start(say=lambda _: None)
            assert dict(table.catch_up(progress=False).items()) == latest
