"""Standby replicas (`logwheel run --standby N`): a process follows the changelogs of
partitions it does not own, so taking them over restores only the tail."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka.admin import AdminClient
from rocksdict import AccessType, Options, Rdict

from framework.ops.members import group_members, standbys
from tests.support import Wordcount, read_topic, wait_for

pytestmark = pytest.mark.timeout(600)


def owned(job) -> set[int]:
    """The count-words partitions the job's current process holds, by its log."""
    parts = set()
    for line in job.output(this_start=True).splitlines():
        if "count-words: assigned" in line:
            parts |= {int(p) for p in re.findall(r"words\[(\d+)\]", line)}
        if "count-words: gave up" in line:
            parts -= {int(p) for p in re.findall(r"words\[(\d+)\]", line)}
    return parts


def replica(state, wc: Wordcount, partition: int) -> dict[str, bytes]:
    """The state documents of a stopped process's store of `partition`."""
    path = state / wc.name / "count-words" / f"task-{partition}"
    db = Rdict(str(path), options=Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return {k[1:].decode(): v for k, v in db.items() if k.startswith(b"s")}
    finally:
        db.close()


def dashboard_standbys(kafka: str, wc: Wordcount) -> dict[int, list[str]]:
    """The standby replicas `logwheel ui` reads from count-words' group."""
    spec = wc.pipeline["count-words"]
    return standbys(spec, group_members(AdminClient({"bootstrap.servers": kafka}), spec.group))


def test_a_takeover_with_a_standby_restores_only_the_tail(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    split = wc.job("split", computations=["split-words"]).start()
    a = wc.job("a", computations=["count-words"]).start()
    b = wc.job("b", computations=["count-words"])
    b.args += ["--standby", "3"]
    try:
        wait_for(lambda: len(owned(a)) == 4, 60, what="a to own every partition")
        b.start()
        wait_for(lambda: len(owned(a)) == 2 and len(owned(b)) == 2, 90, what="b to take two")
        wait_for(lambda: set(dashboard_standbys(kafka, wc)) == owned(a), 30,
                 what="the group to show b's standbys (logwheel ui)")  # fmt: skip
        wc.send_lines(3_000)
        wc.read_counts()
        changelog = f"{wc.name}.count-words.changelog"
        time.sleep(2)  # the standbys read the last commit
        assert b.stop() == 0  # a clean stop flushes the stores, so they can be read
        latest: dict[int, dict[str, bytes | None]] = {}
        for m in sorted(read_topic(kafka, changelog, to_end=True), key=lambda m: m.offset()):
            latest.setdefault(m.partition(), {})[m.key().decode()] = m.value()
        for p in set(range(4)) - owned(b):
            truth = {k: v for k, v in latest.get(p, {}).items() if v is not None}
            assert truth and replica(tmp_path / "state-b", wc, p) == truth, f"standby {p}"
        b.start()
        wait_for(
            lambda: len(owned(b)) == 2 and "standby replicas" in b.output(this_start=True),
            90,
            what="b back with its standbys",
        )
        records = len(read_topic(kafka, changelog, to_end=True))
        restored_before = b.output(this_start=True).count("restored")
        a.kill()
        wait_for(lambda: len(owned(b)) == 4, 90, what="b to take over")
        wc.send_lines(100)
        counts = wc.read_counts()
    finally:
        for job in (a, b, split):
            job.stop()
    wc.check_exact(counts)
    takeover = b.output(this_start=True).split("restored")[restored_before:]
    restored = sum(
        int(re.match(r" (\d+) journal", t).group(1))
        for t in takeover
        if re.match(r" (\d+) journal", t)
    )
    assert restored < records / 100, f"restored {restored} of {records} changelog records"
