"""Other teams read a computation's changelog as a table: the latest state per key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from changelog import ChangelogTable
from framework.errors import ConfigurationError
from tests.support import UniqueJob, Wordcount, wait_for


def test_table_holds_each_words_count_and_follows_changes(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(500)
    job = wc.job().start()
    try:
        wc.read_counts()
        with ChangelogTable(f"{wc.name}.count-words.changelog", bootstrap=kafka) as table:
            table.catch_up()
            assert dict(table.items()) == {w: {"count": n} for w, n in wc.words.items()}
            wc.words.clear()
            wc.send_lines(1)
            changes = []  # until every word of the line has changed: a loaded machine is slow
            for change in table.follow(idle_timeout=60):
                changes.append(change)
                if {key for key, _, _ in changes} >= set(wc.words):
                    break
    finally:
        job.stop()
    assert {key for key, _, _ in changes} == set(wc.words)
    for key, old, new in changes:
        assert new["count"] == old["count"] + wc.words[key]


def test_tombstones_delete_keys(kafka, unique, create_topic):
    topic = unique("table")
    create_topic(topic, partitions=2, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": kafka})
    for key, value in [(b"a", b'{"n":1}'), (b"b", b'{"n":2}'), (b"a", None), (b"c", b'{"n":3}')]:
        producer.produce(topic, value, key)
    producer.flush(30)
    with ChangelogTable(topic, bootstrap=kafka) as table:
        assert dict(table.catch_up().items()) == {"b": {"n": 2}, "c": {"n": 3}}
        assert table.get("a") is None


def test_a_missing_topic_is_named_in_one_line_with_no_traceback(kafka, unique):
    topic = unique("nothing.here.changelog")
    with pytest.raises(ConfigurationError, match=f"no changelog topic '{topic}' at {kafka}"):
        ChangelogTable(topic, bootstrap=kafka)
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "changelog", "dump", topic, "--bootstrap", kafka],
        capture_output=True,
        text=True,
        timeout=120,  # liveness only: the broker answers at once; room for a loaded machine
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"logwheel: no changelog topic '{topic}' at {kafka}"), line


def test_a_rocksdb_table_of_a_running_job_resumes_from_its_tail(kafka, tmp_path):
    """Built from a running job's changelog (1,000,000 keys with LOGWHEEL_TABLE_KEYS, a
    reduced size in make test); equals the job's state before and after it updates and deletes
    keys; reopened, it reads only what was written since it closed."""
    keys = int(os.environ.get("LOGWHEEL_TABLE_KEYS", "20000"))
    job_def = UniqueJob(kafka, tmp_path, "jobs.enrich:build", "table")
    updates = f"{job_def.prefix}profile-updates"
    changelog = f"{job_def.name}.profiles.changelog"
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 20})

    def send(values) -> None:
        for v in values:
            while True:
                try:
                    producer.produce(updates, json.dumps(v).encode())
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.flush(60)

    send({"user": f"u{i}", "name": f"n{i}", "country": "FR"} for i in range(keys))
    job = job_def.job(computations=["profiles"]).start()
    path = tmp_path / "table"
    try:
        table = ChangelogTable(changelog, bootstrap=kafka, path=path)
        wait_for(lambda: len(table.catch_up()) == keys, 300, what="every profile in the table")
        assert table.get("u7") == {"name": "n7", "country": "FR", "version": 1}
        table.close()
        send({"user": f"u{i}", "country": "DE"} for i in range(0, 100, 2))
        send({"user": f"u{i}", "delete": True} for i in range(1, 100, 2))
        table = ChangelogTable(changelog, bootstrap=kafka, path=path)
        wait_for(lambda: len(table.catch_up()) == keys - 50, 120, what="the deletions")
        wait_for(lambda: table.catch_up().get("u98", {}).get("version") == 2, 60, what="updates")
        assert table.read < 1_000, f"reopened, it read {table.read} records, not the tail"
        assert "u1" not in table and table.get("u2")["country"] == "DE"
        assert table.get("u100")["country"] == "FR"
        rows = dict(table.items())
        table.close()
    finally:
        job.stop()
    with ChangelogTable(changelog, bootstrap=kafka) as memory:
        assert dict(memory.catch_up().items()) == rows
