"""Other teams read a computation's changelog as a table: the latest state per key."""

from __future__ import annotations

import threading

from confluent_kafka import Producer

from changelog import ChangelogTable
from tests.support import Wordcount


def test_table_holds_each_words_count_and_follows_changes(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(500)
    job = wc.job().start()
    try:
        wc.read_counts()
        with ChangelogTable(f"{wc.name}.count-words.changelog", bootstrap=kafka) as table:
            table.catch_up()
            assert dict(table.items()) == {w: {"count": n} for w, n in wc.words.items()}
            changes = []
            follower = threading.Thread(
                target=lambda: changes.extend(table.follow(idle_timeout=8)), daemon=True
            )
            follower.start()
            wc.words.clear()
            wc.send_lines(1)
            follower.join(60)
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
