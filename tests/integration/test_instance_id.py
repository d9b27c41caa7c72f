"""`logwheel run --instance-id`: the identity a replacement process takes over (a StatefulSet
pod name), independent of its state directory. The replacement also logs JSON lines
(`--log-format json`), as the job image does."""

from __future__ import annotations

import json
import re

import pytest

from tests.support import Wordcount, read_topic

pytestmark = pytest.mark.timeout(300)


def transactional_ids(kafka: str, name: str) -> set[str]:
    """Transactional ids in the broker's transaction log that contain `name`."""
    found = set()
    for m in read_topic(kafka, "__transaction_state", idle=1, committed=False):
        key = m.key() or b""
        if name.encode() in key:
            found.add(key[key.index(name.encode().split(b".")[0]) :].decode(errors="replace"))
    return found


def test_a_replacement_on_a_new_disk_is_the_same_member(kafka, tmp_path):
    wc = Wordcount(kafka, tmp_path)
    group = f"{wc.name}.count-words"
    wc.send_lines(300)
    first = wc.job("disk-a", computations=["count-words", "split-words"])
    first.args += ["--instance-id", "pod-0"]
    first.start()
    try:
        wc.read_counts()
    finally:
        first.kill()
    wc.send_lines(300)
    second = wc.job("disk-b", computations=["count-words", "split-words"])  # a new disk
    second.args += ["--instance-id", "pod-0", "--log-format", "json"]
    second.start()
    try:
        counts = wc.read_counts()
    finally:
        second.stop()
    wc.check_exact(counts)
    text = second.log.read_text().splitlines()
    assert not [line for line in text if re.match(r"\d{4}-\d\d-\d\d \d\d:", line)], "plain lines"
    lines = [json.loads(line) for line in text if line.startswith("{")]
    assigned = [line for line in lines if " assigned " in line["message"]]
    assert assigned and {"time", "level", "logger", "process"} <= set(assigned[0])
    # one identity across both disks: the state directories' own ids were never used
    assert transactional_ids(kafka, group) == {f"{group}.pod-0"}
