"""`logwheel dlq ls|replay` on a real broker: dead letters sent back after a fix, each once,
through a SIGKILL of the replaying command and of the job mid-replay (issue 42)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from framework.cli.main import main
from framework.core.clock import now_ms
from framework.kafka.replays import REPLAY_OF, header
from framework.ops.dead_letter_counts import dead_letter_summary
from framework.ops.replay import Selection, replay
from framework.streaming.injector import Injector
from tests.support import REPO, UniqueJob, json_values, read_marks, read_topic, wait_for
from tests.unit.sinks.fakes import IdleSink

pytestmark = pytest.mark.timeout(300)

FACTORY = "tests.integration.replay_job:build"

KILLED_REPLAY = """
import os, signal, sys
from confluent_kafka import Producer
import framework.ops.replay as replaying

class Dying(Producer):
    commits = 0

    def commit_transaction(self, *args):
        Dying.commits += 1
        if Dying.commits == 2:  # the second transaction's records reach the broker, uncommitted
            self.flush(30)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().commit_transaction(*args)

replaying.Producer = Dying
from framework.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def cli(job: UniqueJob, *args: str, script: str | None = None) -> subprocess.CompletedProcess:
    """`logwheel dlq ...` on the job's pipeline, in a process of its own."""
    run = ["-c", script] if script else ["-m", "framework.cli"]
    return subprocess.run(
        [sys.executable, *run, "dlq", *args[:1], f"{job.module}:pipeline", "--computation",
         "tally", "--bootstrap", job.bootstrap, *args[1:]],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env={"PYTHONPATH": f"{job.directory}:{REPO}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def in_process(job: UniqueJob, capsys, *args: str) -> str:
    """`logwheel dlq ...` on the job's pipeline, in this process (no interpreter to start):
    what it printed."""
    capsys.readouterr()
    ref = f"{job.module}:pipeline"
    code = main(
        ["dlq", args[0], ref, "--computation", "tally", "--bootstrap", job.bootstrap, *args[1:]]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def test_dead_letters_replayed_after_a_fix_each_once_through_kills(
    kafka, tmp_path, capsys, monkeypatch
):
    fix, hold = tmp_path / "fix", tmp_path / "hold"
    job_def = UniqueJob(kafka, tmp_path, FACTORY, "replay", str(fix), str(hold))
    pipeline, prefix = job_def.pipeline, job_def.prefix
    spec = pipeline["tally"]
    job = job_def.job().start().wait_working()
    t0 = now_ms() - 600_000
    events = [{"i": i, "user": f"u{i % 4}", "bad": 0} for i in range(12)]
    events[3]["bad"] = events[6]["bad"] = 1  # fixed by fix 1
    events[9]["bad"] = 2  # fixed by fix 2 only: fails again when replayed after fix 1
    del events[11]["user"]  # no key until fix 1: dead-lettered by the re-keying task
    with Injector(pipeline, "gen", bootstrap=kafka) as injector:
        for e in events:
            injector.send(f"{prefix}events", e, key=None, timestamp=t0 + e["i"] * 1000)
        injector.advance(t0 + 60_000)  # every record is behind the watermark from now on
    tallies = f"{prefix}tallies"
    assert sorted(v["i"] for v in json_values(read_topic(kafka, tallies, expect=8))) == [
        0, 1, 2, 4, 5, 7, 8, 10,
    ]  # fmt: skip
    first = wait_for(
        lambda: (s := dead_letter_summary(pipeline, "tally", kafka)).total == 4 and s,
        60,
        what="four dead letters",
    )

    # dlq ls counts them, by stage and reason, with where they were read
    monkeypatch.syspath_prepend(str(tmp_path))  # where the CLI imports the job module from
    listed = json.loads(in_process(job_def, capsys, "ls", "--json"))
    assert listed == first.as_json()
    assert (listed["total"], listed["replayed"]) == (4, 0)
    assert listed["stages"] == {"key": 1, "process_record": 3}
    sources = {d["source_topic"] for d in listed["newest"]}
    assert sources == {f"{prefix}events", spec.by_key(f"{prefix}events")}

    # fix 1 deployed; a dry run says what would go and sends nothing
    fix.write_text("1")
    dry = replay(pipeline, "tally", kafka, dry_run=True)
    assert (dry.matched, dry.sent, dry.already) == (4, 4, 0)
    assert read_topic(kafka, spec.replay, committed=False, to_end=True) == []
    assert replay(pipeline, "tally", kafka, Selection(stage="timeout"), dry_run=True).matched == 0

    # the replaying command is killed inside its second transaction; the job, mid-replay
    hold.touch()
    killed = cli(job_def, "replay", "--rate", "2", script=KILLED_REPLAY)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert len(read_topic(kafka, spec.replayed, to_end=True)) == 2
    wait_for((tmp_path / "hold.reached").exists, 60, what="the job to run a replayed record")
    job.kill()
    hold.unlink()
    job.start().wait_working()
    again = in_process(job_def, capsys, "replay")
    assert "4 dead letters match, 2 already replayed; sent 2" in again, again

    # each sent once, processed once though behind the watermark; bad=2 failed again
    replays = read_topic(kafka, spec.replay, to_end=True)
    sent = {header(m.headers(), REPLAY_OF): (m.key(), m.timestamp()[1]) for m in replays}
    assert len(replays) == len(sent) == 4  # each once, with its original key and timestamp
    assert sent == {
        d["dead_letter"]: (d["key"] and d["key"].encode(), d["timestamp"]) for d in listed["newest"]
    }
    outputs = json_values(read_topic(kafka, tallies, expect=11, to_end=True))
    assert sorted(v["i"] for v in outputs) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11]
    assert {v["i"]: v["late"] for v in outputs if v["late"]} == {3: True, 6: True, 11: True}
    assert next(v for v in outputs if v["i"] == 11)["user"] == "nobody"  # re-keyed by the fix
    second = wait_for(
        lambda: (s := dead_letter_summary(pipeline, "tally", kafka)).total == 5 and s,
        60,
        what="the record that failed again to be dead-lettered again",
    )
    assert second.replayed == 4
    (again_letter,) = [d for d in second.newest if d["replays"]]
    original = next(d for d in listed["newest"] if d["dead_letter"] == again_letter["replays"])
    assert (
        original["reason"]
        == again_letter["reason"]
        == "ValueError: cannot handle bad=2 before fix 2"
    )
    assert again_letter["source_topic"] == spec.replay

    # fix 2: the new dead letter goes back; then nothing is left to send
    fix.write_text("2")
    assert replay(pipeline, "tally", kafka).sent == 1
    outputs = json_values(read_topic(kafka, tallies, expect=12, to_end=True))
    assert sorted(v["i"] for v in outputs) == list(range(12))
    last = replay(pipeline, "tally", kafka)
    assert (last.matched, last.already, last.sent) == (5, 5, 0)
    assert job.alive(), job.output()[-3000:]
    job.stop()

    # the replayed records moved no watermark back
    for producer in {m.producer for m in read_marks(kafka, spec.watermarks)}:
        marks = [m.watermark for m in read_marks(kafka, spec.watermarks) if m.producer == producer]
        assert marks == sorted(marks), producer


def test_a_sinks_dead_letters_are_listed_and_an_unknown_name_is_refused(kafka, tmp_path):
    from confluent_kafka import Producer

    from framework.core.pipeline import PipelineError
    from tests.conftest import create_topics

    job_def = UniqueJob(kafka, tmp_path, FACTORY, "sinkdlq", "fix", "hold", create=False)
    pipeline = job_def.pipeline.sink(
        "orders-db", inputs={f"{job_def.prefix}tallies": None}, sink=IdleSink()
    )
    topic = f"{pipeline.name}.orders-db.dlq"
    create_topics(kafka, [topic])
    producer = Producer({"bootstrap.servers": kafka})
    told = {"logwheel.error": "UniqueViolation: duplicate key", "logwheel.error.stage": "write"}
    told |= {"logwheel.source.topic": "paid", "logwheel.source.partition": "0"}
    producer.produce(topic, b"{}", b"k", headers={**told, "logwheel.source.offset": "7"})
    producer.flush(30)
    summary = dead_letter_summary(pipeline, "orders-db", kafka)
    assert (summary.total, summary.replayed, summary.stages) == (1, 0, {"write": 1})
    assert summary.newest[0]["source_offset"] == 7
    with pytest.raises(PipelineError, match="has no part 'nothing'"):
        dead_letter_summary(pipeline, "nothing", kafka)
    assert dead_letter_summary(pipeline, "tally", kafka).total == 0  # its topics not made yet
    with pytest.raises(PipelineError, match="sink 'orders-db''s dead letters do not go back"):
        replay(pipeline, "orders-db", kafka)
