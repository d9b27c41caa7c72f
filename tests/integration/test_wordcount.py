"""The runtime core on a real broker: exact counts, restore from the changelog, rebalancing,
fencing of zombies and dead letters."""

from __future__ import annotations

import shutil
import signal

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.support import Wordcount, read_topic, wait_for

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_counts_every_word_once(kafka, tmp_path, guarantee):
    wc = Wordcount(kafka, tmp_path, guarantee)
    wc.send_lines(2_000)
    job = wc.job().start()
    try:
        counts = wc.read_counts()
    finally:
        assert job.stop() == 0, job.output()
    wc.check_exact(counts)


def test_deleting_local_state_changes_nothing(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(1_000)
    job = wc.job().start()
    wc.read_counts()  # the first half counted
    assert job.stop() == 0, job.output()
    shutil.rmtree(tmp_path / "state-a")
    wc.send_lines(1_000)
    job = wc.job().start()
    try:
        counts = wc.read_counts()
    finally:
        job.stop()
    wc.check_exact(counts)


def _members(kafka: str, group: str) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": kafka})
    desc = admin.describe_consumer_groups([group])[group].result(30)
    return {  # its keyed tasks: the partitions of its input, not those of its replay topic
        m.client_id + m.member_id: sum(
            not tp.topic.endswith(".replay") for tp in m.assignment.topic_partitions
        )
        for m in desc.members
    }


def test_second_instance_takes_half(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    group = f"{wc.name}.count-words"
    wc.send_lines(1_000)
    a = wc.job("a", computations=["split-words", "count-words"]).start()
    try:
        wait_for(lambda: len(_members(kafka, group)) == 1, 60, what="first member")
        wc.send_lines(1_000)
        b = wc.job("b", computations=["split-words", "count-words"]).start()
        try:
            wait_for(
                lambda: sorted(_members(kafka, group).values()) == [2, 2],
                90,
                what="the second member takes half of the partitions",
            )
            wc.send_lines(1_000)
            counts = wc.read_counts()
        finally:
            b.stop()
    finally:
        a.stop()
    wc.check_exact(counts)


def test_zombie_is_fenced(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    group = f"{wc.name}.count-words"
    a = wc.job("a", computations=["count-words"]).start()
    split = wc.job("split", computations=["split-words"]).start()
    b = wc.job("b", computations=["count-words"])
    try:
        wait_for(lambda: len(_members(kafka, group)) == 1, 60, what="zombie-to-be joins")
        b.start()
        wait_for(lambda: len(_members(kafka, group)) == 2, 60, what="second member joins")
        wc.send_lines(500)
        wc.read_counts()
        a.signal(signal.SIGSTOP)  # a keeps its open transaction, frozen
        wc.send_lines(500)
        wait_for(lambda: list(_members(kafka, group).values()) == [4], 60, what="partitions move")
        wc.send_lines(500)
        # b alone counted every line so far, exactly, past a's open transaction
        wc.check_exact(wc.read_counts())
        a.signal(signal.SIGCONT)  # the zombie wakes up and tries to commit
        wait_for(lambda: "rejoining the group" in a.output(), 60, what="the zombie to rejoin")
        wc.send_lines(500)
        counts = wc.read_counts()
    finally:
        a.signal(signal.SIGCONT)
        for job in (a, b, split):
            job.stop()
    wc.check_exact(counts)  # nothing the zombie held was committed on top


def test_poison_records_go_to_the_dead_letter_topic(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    wc.send_lines(100)
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(wc.lines_topic, b"\xff not json", b"bad-bytes")
    producer.produce(wc.lines_topic, b'{"no_line": 1}', b"bad-shape")
    producer.flush(30)
    wc.send_lines(100)
    job = wc.job().start()
    try:
        counts = wc.read_counts()
        dead = read_topic(kafka, f"{wc.name}.split-words.dlq", expect=2, timeout=60)
    finally:
        job.stop()
    wc.check_exact(counts)
    headers = {m.key(): dict(m.headers()) for m in dead}
    assert set(headers) == {b"bad-bytes", b"bad-shape"}
    assert headers[b"bad-bytes"]["logwheel.error.stage"] == b"decode"
    assert b"KeyError" in headers[b"bad-shape"]["logwheel.error"]
    assert headers[b"bad-shape"]["logwheel.source.topic"] == wc.lines_topic.encode()
    assert {m.value() for m in dead} == {b"\xff not json", b'{"no_line": 1}'}
