"""`logwheel dlq ls|replay` (framework/cli/dlq.py), each run against a stand-in of the function it
calls: what `ls` hands the summary (the loaded pipeline, the part, the bootstrap, --config's
[kafka] table, --newest) and how it prints the answer (one JSON object, or tables and the
command to replay them, the latter only for a part whose dead letters go back and are not all
replayed); what `replay` hands the replay (the selection, its times parsed, --dry-run, --rate,
--config's [kafka] and [registry]) and the report's lines it prints. Counting is tested in
tests/unit/ops/test_dead_letter_counts.py; replaying in tests/unit/ops/test_replay.py."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from framework.cli.main import main
from framework.kafka.registry_settings import RegistrySettings
from framework.ops.dead_letter_counts import DeadLetterSummary, ReasonCount
from framework.ops.replay import ReplayReport, Selection
from jobs.wordcount import build
from tests.unit.cli.recording import PIPELINE, record
from tests.unit.sinks.fakes import IdleSink

pytestmark = pytest.mark.usefixtures("no_broker")
SUMMARY = "framework.ops.dead_letter_counts.dead_letter_summary"
REPLAY = "framework.ops.replay.replay"
HINT = "replay after the fix: logwheel dlq replay"


def newest(n: int, stage: str, source: str, partition, offset, replayed: bool) -> dict:
    """One of the newest dead letters as `dlq ls` gets it (`DeadLetter.describe`)."""
    return {"dead_letter": f"wordcount.count-words.dlq/0/{n}", "timestamp": 1000 + n, "key": "k",
            "stage": stage, "reason": "ValueError: boom", "source_topic": source,
            "source_partition": partition, "source_offset": offset, "replays": None,
            "replayed": replayed}  # fmt: skip


def summary(total: int = 3, replayed: int = 1, name: str = "count-words") -> DeadLetterSummary:
    """A part's dead letters counted: `total` of them (none, or a timer's and a record's newest),
    `replayed` sent back."""
    topic = f"wordcount.{name}.dlq"
    if not total:
        return DeadLetterSummary(name, topic, 0, 0, {}, [])
    sent = min(replayed, total - 1)  # the records' first, then the timer's
    reasons = [
        ReasonCount("process_record", "ValueError: boom", total - 1, sent),
        ReasonCount("timeout", "TimedOut: after 60000 ms", 1, replayed - sent),
    ]
    latest = [
        newest(7, "timeout", "", None, None, False),  # a timer's firing, read from nowhere
        newest(4, "process_record", "words", 2, 41, True),
    ]
    stages = {"process_record": total - 1, "timeout": 1}
    return DeadLetterSummary(name, topic, total, replayed, stages, reasons, latest)


def config(tmp_path, registry: bool = False) -> str:
    path = tmp_path / "c.toml"
    text = '[kafka]\n"security.protocol" = "SSL"\n'
    path.write_text(text + ('[registry]\nurl = "http://r:8081"\n' if registry else ""))
    return str(path)


# -- ls ----------------------------------------------------------------------------------------


def test_ls_hands_the_summary_the_part_and_its_options_and_prints_one_json_object(
    monkeypatch, tmp_path, capsys
):
    calls = record(monkeypatch, SUMMARY, returns=summary())
    args = ["dlq", "ls", PIPELINE, "--computation", "count-words", "--json", "--newest", "2",
            "--bootstrap", "b:9092", "--config", config(tmp_path)]  # fmt: skip
    assert main(args) == 0
    (pipeline, name, bootstrap, kafka, n), kwargs = calls.one
    assert (pipeline.name, name, bootstrap, n, kwargs) == ("wordcount", "count-words", "b:9092",
                                                           2, {})  # fmt: skip
    assert kafka == {"security.protocol": "SSL"}
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out) == summary().as_json()


def test_ls_by_default_shows_five_newest_of_a_part_named_with_part_and_no_config(monkeypatch):
    monkeypatch.setenv("LOGWHEEL_BOOTSTRAP", "env:9092")
    calls = record(monkeypatch, SUMMARY, returns=summary())
    assert main(["dlq", "ls", PIPELINE, "--part", "split-words", "--json"]) == 0
    (_, name, bootstrap, kafka, n), _ = calls.one
    assert (name, bootstrap, kafka, n) == ("split-words", "env:9092", {}, 5)


def test_ls_prints_the_counts_the_newest_and_how_to_replay_what_is_not_replayed(
    monkeypatch, capsys
):
    record(monkeypatch, SUMMARY, returns=summary(total=3, replayed=1))
    assert main(["dlq", "ls", PIPELINE, "--computation", "count-words", "--bootstrap", "b:1"]) == 0
    out = capsys.readouterr().out
    lines = [" ".join(line.strip(" │┃").split()) for line in out.splitlines()]
    assert lines[0] == "wordcount.count-words.dlq: 3 dead letters, 1 replayed"
    rows = [line.split(" │ ") for line in lines if "│" in line]
    assert rows == [
        ["process_record", "ValueError: boom", "2", "1"],
        ["timeout", "TimedOut: after 60000 ms", "1", "0"],
        ["wordcount.count-words.dlq/0/7", "timeout", "-", "-", "-", "no"],  # read from nowhere
        ["wordcount.count-words.dlq/0/4", "process_record", "words", "2", "41", "yes"],
    ]
    assert lines[-1] == f"{HINT} {PIPELINE} --computation count-words"
    assert out.count(HINT) == 1


def test_ls_gives_no_replay_command_once_every_dead_letter_is_replayed(monkeypatch, capsys):
    record(monkeypatch, SUMMARY, returns=summary(total=3, replayed=3))
    assert main(["dlq", "ls", PIPELINE, "--computation", "count-words", "--bootstrap", "b:1"]) == 0
    out = capsys.readouterr().out
    assert "3 dead letters, 3 replayed" in out and "TimedOut: after 60000 ms" in out
    assert HINT not in out


def test_ls_of_no_dead_letters_is_one_line(monkeypatch, capsys):
    record(monkeypatch, SUMMARY, returns=summary(total=0, replayed=0))
    assert main(["dlq", "ls", PIPELINE, "--computation", "count-words", "--bootstrap", "b:1"]) == 0
    assert capsys.readouterr().out == "wordcount.count-words.dlq: 0 dead letters, 0 replayed\n"


def test_ls_never_tells_to_replay_a_sinks_dead_letters(monkeypatch, capsys):
    with_sink = build().sink("db", inputs={"word-counts": None}, sink=IdleSink())
    loaded = record(monkeypatch, "framework.streaming.loading.load_pipeline", returns=with_sink)
    record(monkeypatch, SUMMARY, returns=summary(total=3, replayed=0, name="db"))
    assert main(["dlq", "ls", PIPELINE, "--part", "db", "--bootstrap", "b:1"]) == 0
    assert loaded.one == ((PIPELINE,), {})
    out = capsys.readouterr().out
    assert out.startswith("wordcount.db.dlq: 3 dead letters, 0 replayed\n")
    assert "ValueError: boom" in out and HINT not in out


# -- replay ------------------------------------------------------------------------------------


def test_replay_hands_the_replay_the_selection_and_options_and_prints_its_report(
    monkeypatch, tmp_path, capsys
):
    report = ReplayReport("wordcount.count-words.dlq", matched=3, sent=2, failed_again=1,
                          kept=Counter({"it does not say where it was read": 1}))  # fmt: skip
    calls = []

    def replay(*args, **kwargs):
        calls.append((args, kwargs))
        kwargs["progress"](0, 3)  # at no terminal, the bar is not drawn
        kwargs["progress"](3, 3)
        return report

    monkeypatch.setattr(REPLAY, replay)
    args = ["dlq", "replay", PIPELINE, "--computation", "count-words", "--stage",
            "process_record", "--reason", "ValueError", "--since", "2026-11-21T12:00:00Z",
            "--until", "2026-11-21T13:00:00.250+01:00", "--dry-run", "--rate", "2.5",
            "--bootstrap", "b:9092", "--config", config(tmp_path, registry=True)]  # fmt: skip
    assert main(args) == 0
    [((pipeline, computation, bootstrap, selection), kwargs)] = calls
    assert (pipeline.name, computation, bootstrap) == ("wordcount", "count-words", "b:9092")
    noon = 1_795_262_400_000  # 2026-11-21T12:00:00Z
    assert selection == Selection("process_record", "ValueError", noon, noon + 250)
    assert kwargs.pop("progress") is not None
    assert kwargs == {"dry_run": True, "rate": 2.5, "kafka": {"security.protocol": "SSL"},
                      "registry": RegistrySettings("http://r:8081")}  # fmt: skip
    assert capsys.readouterr().out == "".join(f"{line}\n" for line in report.lines())


def test_replay_by_default_takes_every_dead_letter_for_real_at_full_speed(monkeypatch, capsys):
    report = ReplayReport("wordcount.split-words.dlq", matched=1, sent=1)
    calls = record(monkeypatch, REPLAY, returns=report)
    args = ["dlq", "replay", PIPELINE, "--computation", "split-words", "--bootstrap", "b:1"]
    assert main(args) == 0
    (_, computation, _, selection), kwargs = calls.one
    assert (computation, selection) == ("split-words", Selection())
    assert (kwargs["dry_run"], kwargs["rate"], kwargs["kafka"], kwargs["registry"]) == (
        False, None, {}, None,
    )  # fmt: skip
    assert capsys.readouterr().out == (
        "wordcount.split-words.dlq: 1 dead letters match, 0 already replayed; "
        "sent 1 to the replay topic\n"
    )


def test_a_rate_that_is_not_a_number_is_argparses_usage_error(monkeypatch, capsys):
    calls = record(monkeypatch, REPLAY)
    with pytest.raises(SystemExit) as usage:
        main(["dlq", "replay", PIPELINE, "--computation", "count-words", "--rate", "fast"])
    assert usage.value.code == 2
    assert "argument --rate: invalid float value: 'fast'" in capsys.readouterr().err
    assert calls == []


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("moment", ["yesterday", "2026-11-21T12:00:00", "earliest"])
def test_a_time_that_is_no_iso_date_time_with_a_zone_is_one_line_naming_its_option(
    monkeypatch, capsys, option, moment
):
    calls = record(monkeypatch, REPLAY)
    args = ["dlq", "replay", PIPELINE, "--computation", "count-words", option, moment,
            "--bootstrap", "b:1"]  # fmt: skip
    assert main(args) == 1
    assert capsys.readouterr().err == (
        f"logwheel: {option} {moment!r}: give an ISO date-time with a time zone, "
        "like 2026-11-21T12:00:00Z\n"
    )
    assert calls == []
