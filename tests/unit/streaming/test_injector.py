"""FileInjector reads regular files of its directory only (a symlink is skipped) and names each
record by its file's name and line, relative to the directory, never by a machine's path."""

from __future__ import annotations

import json
import os

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
