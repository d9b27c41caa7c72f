"""The stream-table join on a real broker: each page view enriched once, with its user's
profile as of its processing — through profile updates and deletions, and SIGKILLs of the
join's process."""

from __future__ import annotations

import json
import random
import threading

import pytest
from confluent_kafka import Producer

from changelog import ChangelogTable
from framework.core.pipeline import Pipeline, PipelineError
from framework.serde.catalogue import decoder_for, encoder_for
from framework.streaming.runner import Runner
from tests.support import UniqueJob, read_topic, wait_for

pytestmark = pytest.mark.timeout(600)
USERS = [f"u{i}" for i in range(20)]


class Feed:
    def __init__(self, kafka: str, prefix: str) -> None:
        self.producer = Producer({"bootstrap.servers": kafka, "partitioner": "murmur2_random"})
        self.prefix = prefix
        self.encode = encoder_for("enrich.PageView")
        self.views: dict[str, str] = {}  # id -> user

    def profiles(self, updates: list[dict]) -> None:
        for u in updates:
            self.producer.produce(f"{self.prefix}profile-updates", json.dumps(u).encode())
        self.producer.flush(30)

    def page_views(self, tag: str, n: int, rng: random.Random) -> None:
        for i in range(n):
            view = {"id": f"{tag}{i}", "user": rng.choice(USERS), "url": f"/p/{i % 7}"}
            self.views[view["id"]] = view["user"]
            self.producer.produce(f"{self.prefix}page-views", self.encode(view))
        self.producer.flush(30)


def test_each_page_view_is_enriched_once_as_of_its_processing(kafka, tmp_path):
    job_def = UniqueJob(kafka, tmp_path, "jobs.enrich:build", "enrich")
    feed, rng = Feed(kafka, job_def.prefix), random.Random(7)
    changelog = f"{job_def.name}.profiles.changelog"
    out = f"{job_def.prefix}enriched-page-views"
    decode = decoder_for("enrich.EnrichedPageView")
    profiles = job_def.job("profiles", computations=["profiles"]).start()
    join = job_def.job("join", computations=["enrich"]).start()

    def outputs(expect: int) -> list[dict]:
        return [decode(m.value()) for m in read_topic(kafka, out, expect=expect, timeout=120)]

    def table_is(expected: dict) -> bool:
        with ChangelogTable(changelog, bootstrap=kafka) as table:
            return {k: v["version"] for k, v in table.catch_up().items()} == expected

    try:
        feed.profiles([{"user": u, "name": u.upper(), "country": "FR"} for u in USERS])
        wait_for(lambda: table_is(dict.fromkeys(USERS, 1)), 60, what="profiles v1")
        feed.page_views("a", 3_000, rng)
        wait_for(lambda: len(read_topic(kafka, out, idle=0.5)) > 0, 60, what="first outputs")
        join.kill()  # mid-stream
        join.start()
        first = outputs(3_000)
        feed.profiles([{"user": u, "country": "DE"} for u in USERS[:10]])
        feed.profiles([{"user": u, "delete": True} for u in USERS[10:15]])
        expected = {**dict.fromkeys(USERS[:10], 2), **dict.fromkeys(USERS[15:], 1)}
        wait_for(lambda: table_is(expected), 60, what="profiles v2 and deletions")
        feed.page_views("b", 3_000, rng)
        wait_for(lambda: len(read_topic(kafka, out, idle=0.5)) > 3_000, 60, what="b outputs")
        join.kill()
        join.start()
        every = outputs(6_000)
        extra = read_topic(kafka, out, to_end=True)  # any duplicate committed with them
    finally:
        join.stop()
        profiles.stop()
    assert len(extra) == 6_000, f"{len(extra)} outputs for 6000 page views"
    ids = [v["id"] for v in every]
    assert sorted(ids) == sorted(feed.views), "a page view lost or enriched twice"
    for v in first:
        assert (v["user"], v["country"], v["profile_version"]) == (v["user"], "FR", 1), v
    for v in every:
        if v["id"].startswith("b"):
            want = {"DE": 2, None: None, "FR": 1}
            country = (
                "DE" if v["user"] in USERS[:10] else None if v["user"] in USERS[10:15] else "FR"
            )
            assert (v["country"], v["profile_version"]) == (country, want[country]), v
            assert v["name"] == (None if country is None else v["user"].upper())


def test_a_table_that_is_not_co_partitioned_fails_at_start(kafka, tmp_path, create_topic, unique):
    table = create_topic(partitions=3, config={"cleanup.policy": "compact"})
    name = unique("join")
    pipeline = Pipeline(name, partitions=4).source(f"{name}-in")
    pipeline.computation("j", object, inputs={f"{name}-in": None}, tables={"t": table})
    runner = Runner(pipeline, "j", bootstrap=kafka, state_dir=tmp_path)
    with pytest.raises(PipelineError, match="must have 4 partitions .* but has 3: co-partition"):
        runner.run(threading.Event())


def test_garbage_and_unknown_fingerprints_reach_the_dead_letter_topic(kafka, tmp_path):
    job_def = UniqueJob(kafka, tmp_path, "jobs.enrich:build", "badavro")
    views = f"{job_def.prefix}page-views"
    encode = encoder_for("enrich.PageView")
    good = encode({"id": "1", "user": "u1", "url": "/"})
    unknown = good[:2] + bytes(8) + good[10:]  # a writer schema no schemas/ file has
    producer = Producer({"bootstrap.servers": kafka})
    for key, value in [(b"a", good), (b"b", b"\x00garbage"), (b"c", unknown), (b"d", good)]:
        producer.produce(views, value, key)
    producer.flush(30)
    job = job_def.job("join", computations=["enrich"]).start()
    try:
        out = read_topic(kafka, f"{job_def.prefix}enriched-page-views", expect=2, timeout=90)
        dead = read_topic(kafka, f"{job_def.name}.enrich.dlq", expect=2, timeout=90)
    finally:
        job.stop()
    assert len(out) == 2
    reasons = {m.key(): dict(m.headers())["logwheel.error"].decode() for m in dead}
    assert "no Avro single-object marker" in reasons[b"b"]
    assert "unknown writer schema fingerprint" in reasons[b"c"]
