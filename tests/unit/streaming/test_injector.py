"""FileInjector reads regular files of its directory only (a symlink is skipped) and names each
record by its file's name and line, relative to the directory, never by a machine's path."""

from __future__ import annotations

import json
import os
import threading
from types import SimpleNamespace

import pytest

from framework.streaming.injector import FileInjector


class Recorder:
    """Stands in for an Injector: what a FileInjector sends and promises."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []
        self.marks: list[int] = []

    def send(self, stream, value, *, key, timestamp, record_id):
        self.sent.append((stream, value, key, timestamp, record_id))

    def advance(self, watermark: int) -> None:
        self.marks.append(watermark)


def parse(line: str):
    doc = json.loads(line)
    return doc["k"], doc, doc["ts"]


def test_symlinks_are_skipped_and_ids_are_relative(tmp_path):
    inbox, secret = tmp_path / "inbox", tmp_path / "secret.json"
    inbox.mkdir()
    (inbox / "a.json").write_text('{"k": "x", "ts": 1}\n{"k": "y", "ts": 2}\n')
    secret.write_text('{"k": "s", "ts": 3}\n')
    os.symlink(secret, inbox / "link.json")
    recorder = Recorder()
    assert FileInjector(recorder, "events", inbox, parse).run_once() == 2
    assert [s[-1] for s in recorder.sent] == ["a.json:0", "a.json:1"]
    assert not any(str(tmp_path) in s[-1] for s in recorder.sent)


def test_a_transactional_call_blocked_for_good_ends_the_injector_naming_it(monkeypatch):
    """librdkafka#5456 in an injector: its `commit_transaction` blocked past its timeout and a
    margin is left behind, and the injector raises `Fatal` naming the call (a new one, with
    the same process number, fences and aborts it) instead of waiting forever."""
    from framework import InjectorWatermark, Pipeline
    from framework.errors import Fatal
    from framework.streaming import injector as injector_mod
    from tests.unit.streaming.fakes import FakeCollector

    release = threading.Event()
    collector = FakeCollector()

    def commit_transaction(timeout):
        release.wait()

    collector.producer.commit_transaction = commit_transaction
    collector.producer.list_topics = lambda timeout: SimpleNamespace(
        topics={"events": SimpleNamespace(partitions={0: None})}
    )
    collector.claim_ends = lambda partitions: None
    monkeypatch.setattr(injector_mod, "create_part_topics", lambda *args: None)
    monkeypatch.setattr(injector_mod, "Collector", lambda config: collector)
    real_call = injector_mod.BoundedCalls.call
    monkeypatch.setattr(
        injector_mod.BoundedCalls,
        "call",
        lambda self, fn, *args, wait: real_call(self, fn, *args, wait=min(wait, 0.2)),
    )
    pipeline = Pipeline("p").source("events", watermark=InjectorWatermark("feed"))
    feed = injector_mod.Injector(pipeline, "feed", bootstrap="127.0.0.1:1")
    feed.send("events", {"x": 1}, key="k", timestamp=1)
    with pytest.raises(Fatal, match="commit_transaction has not returned after 0.2 s"):
        feed.advance(2)
    feed.close()  # its abort is not waited for either: the call before is still blocked
    release.set()
