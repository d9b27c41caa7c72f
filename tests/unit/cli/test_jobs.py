"""The commands that act on a pipeline's job (framework/cli/jobs.py): `run`, `topics`, `status`,
`graph`, `reset` and `backfill`, each parsed from a command line and run against a stand-in of
the function it calls: what that function is handed (options, their defaults and the
environment's, --config's tables), what the command prints of its answer, its exit code, and
the usage error a bad option gives. What the functions do is tested where they live."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from framework.cli.main import main
from framework.ops.status import Status
from tests.unit.cli.recording import PIPELINE, record

pytestmark = pytest.mark.usefixtures("no_broker")
RUN = "framework.streaming.supervisor.run_computations"
RESET = "framework.ops.reset.reset"
BACKFILL = "framework.backfill.driver.backfill"
ENVIRONMENT = ("LOGWHEEL_STATE_DIR", "LOGWHEEL_METRICS_PORT", "LOGWHEEL_METRICS_ADDR",
               "LOGWHEEL_INSTANCE_ID", "LOGWHEEL_SERVE", "LOGWHEEL_LOG_FORMAT")  # fmt: skip


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


def usage_error(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as usage:
        main(list(args))
    assert usage.value.code == 2
    return capsys.readouterr().err


# -- run ---------------------------------------------------------------------------------------


def test_run_hands_the_supervisor_every_option_and_exits_with_its_code(monkeypatch, no_broker):
    calls = record(monkeypatch, RUN, returns=3)
    args = ["run", PIPELINE, "--computation", "split-words", "--computation", "count-words",
            "--state-dir", "/var/lw", "--metrics-port", "9100", "--metrics-addr", "0.0.0.0",
            "--instance-id", "pod-1", "--log-format", "json", "--commit-interval-ms", "250",
            "--standby", "2", "--serve", "0.0.0.0:8701", "--bootstrap", "b:9092",
            "--config", "c.toml"]  # fmt: skip
    assert main(args) == 3
    assert calls.one == ((PIPELINE, ["split-words", "count-words"]), {
        "bootstrap": "b:9092", "state_dir": Path("/var/lw"), "config_file": "c.toml",
        "standby": 2, "metrics_port": 9100, "metrics_addr": "0.0.0.0", "instance_id": "pod-1",
        "log_format": "json", "commit_interval_ms": 250, "serve": "0.0.0.0:8701",
    })  # fmt: skip
    assert no_broker.one == (("json",), {})  # the process's logging set up in that format


def test_run_defaults_come_from_the_environment_else_are_off(monkeypatch):
    calls = record(monkeypatch, RUN, returns=0)
    monkeypatch.setenv("LOGWHEEL_BOOTSTRAP", "env:9092")
    assert main(["run", PIPELINE]) == 0
    _, kwargs = calls.one
    assert kwargs == {
        "bootstrap": "env:9092", "state_dir": Path(".logwheel/state"), "config_file": None,
        "standby": 0, "metrics_port": None, "metrics_addr": "127.0.0.1", "instance_id": None,
        "log_format": None, "commit_interval_ms": None, "serve": None,
    }  # fmt: skip
    for name, value in [("LOGWHEEL_STATE_DIR", "/srv/state"), ("LOGWHEEL_METRICS_PORT", "9200"),
                        ("LOGWHEEL_METRICS_ADDR", "10.0.0.7"), ("LOGWHEEL_INSTANCE_ID", "pod-7"),
                        ("LOGWHEEL_SERVE", "8700")]:  # fmt: skip
        monkeypatch.setenv(name, value)
    assert main(["run", PIPELINE]) == 0
    _, kwargs = calls[-1]
    assert (kwargs["state_dir"], kwargs["metrics_port"], kwargs["metrics_addr"],
            kwargs["instance_id"], kwargs["serve"]) == (
        Path("/srv/state"), 9200, "10.0.0.7", "pod-7", "8700",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--log-format", "xml"], "argument --log-format: invalid choice: 'xml'"),
        (["--standby", "one"], "argument --standby: invalid int value: 'one'"),
        (["--metrics-port", "x"], "argument --metrics-port: invalid int value: 'x'"),
    ],
)
def test_run_refuses_a_bad_option_with_its_usage(capsys, args, says):
    assert says in usage_error(capsys, "run", PIPELINE, *args)


# -- topics ------------------------------------------------------------------------------------


def test_topics_creates_the_pipelines_topics_and_says_which_were_there(monkeypatch, capsys):
    created = ["words", "wordcount.count-words.changelog"]
    calls = record(monkeypatch, "framework.kafka.topics.create_topics", returns=created)
    args = ["topics", PIPELINE, "--replication-factor", "3", "--bootstrap", "b:9092"]
    assert main(args) == 0
    (bootstrap, pipeline), kwargs = calls.one
    assert (bootstrap, pipeline.name) == ("b:9092", "wordcount")
    assert kwargs == {"client_config": {}, "replication_factor": 3}
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "exists   lines (4 partitions, delete)",
        "created  words (4 partitions, delete)",
        "exists   word-counts (4 partitions, delete)",
    ]
    assert "created  wordcount.count-words.changelog (4 partitions, compact)" in out
    assert "exists   wordcount.split-words.changelog (4 partitions, compact)" in out
    assert len(out) == 15  # one line per topic of the pipeline


def test_topics_by_default_lets_the_cluster_size_choose_the_replication(monkeypatch):
    calls = record(monkeypatch, "framework.kafka.topics.create_topics", returns=[])
    assert main(["topics", PIPELINE, "--bootstrap", "b:9092"]) == 0
    assert calls.one[1]["replication_factor"] is None


# -- status and graph --------------------------------------------------------------------------

ROW = Status("count-words", "words", 0, 1_000, 50, 7, 900, "pod-0", offset=12)


def test_status_as_json_is_one_line_per_partition(monkeypatch, capsys):
    calls = record(monkeypatch, "framework.ops.status.status", returns=[ROW, ROW])
    assert main(["status", PIPELINE, "--json", "--bootstrap", "b:9092"]) == 0
    (pipeline, bootstrap, kafka), _ = calls.one
    assert (pipeline.name, bootstrap, kafka) == ("wordcount", "b:9092", {})
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and rows[0]["owner"] == "pod-0" and rows[0]["consumer_lag"] == 7


def test_status_as_json_with_watch_asks_again_every_two_seconds(monkeypatch, capsys):
    class Stop(Exception):
        pass

    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise Stop

    calls = record(monkeypatch, "framework.ops.status.status", returns=[ROW])
    monkeypatch.setattr("time.sleep", sleep)
    with pytest.raises(Stop):
        main(["status", PIPELINE, "--json", "--watch", "--bootstrap", "b:9092"])
    assert sleeps == [2, 2] and len(calls) == 2
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_status_for_a_terminal_is_a_table_of_the_partitions(monkeypatch, capsys):
    record(monkeypatch, "framework.ops.status.status", returns=[ROW])
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["status", PIPELINE, "--bootstrap", "b:9092"]) == 0
    out = capsys.readouterr().out
    assert "wordcount" in out and "count-words" in out and "words" in out


def test_graph_prints_the_topology_as_dot(capsys):
    assert main(["graph", PIPELINE]) == 0
    out = capsys.readouterr().out
    assert out.startswith('digraph "wordcount" {') and '"c:count-words"' in out


# -- reset -------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def resets(monkeypatch) -> list[dict]:
    """The stand-in reset's calls (kwargs, with the computation and point); it plans 2 lines."""
    calls = []

    def reset(pipeline, computation, to, **kwargs):
        calls.append({"pipeline": pipeline.name, "computation": computation, "to": to, **kwargs})
        return ["seek words[0] to 0", "empty the local state"]

    monkeypatch.setattr(RESET, reset)
    return calls


def test_a_dry_run_reset_says_what_it_would_do(monkeypatch, capsys):
    calls = resets(monkeypatch)
    args = ["reset", PIPELINE, "--computation", "count-words", "--to", "earliest", "--dry-run",
            "--state-dir", "/var/lw", "--bootstrap", "b:9092"]  # fmt: skip
    assert main(args) == 0
    assert calls == [{"pipeline": "wordcount", "computation": "count-words", "to": "earliest",
                      "bootstrap": "b:9092", "state_dir": Path("/var/lw"), "wipe_state": False,
                      "dry_run": True, "kafka": {}}]  # fmt: skip
    assert capsys.readouterr().out == "would: seek words[0] to 0\nwould: empty the local state\n"


def test_a_reset_from_a_script_goes_ahead_and_says_what_it_did(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setenv("LOGWHEEL_STATE_DIR", "/srv/state")
    calls = resets(monkeypatch)
    args = ["reset", PIPELINE, "--computation", "count-words", "--to", "latest", "--wipe-state",
            "--bootstrap", "b:9092"]  # fmt: skip
    assert main(args) == 0
    assert [(c["dry_run"], c["wipe_state"], c["state_dir"]) for c in calls] == [
        (False, True, Path("/srv/state"))
    ]
    assert capsys.readouterr().out == "done: seek words[0] to 0\ndone: empty the local state\n"


@pytest.mark.parametrize(("answer", "dry_runs", "code"), [("n\n", [True], 1),
                                                          ("y\n", [True, False], 0)])  # fmt: skip
def test_wiping_state_at_a_terminal_shows_the_plan_and_asks_first(
    monkeypatch, capsys, answer, dry_runs, code
):
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    calls = resets(monkeypatch)
    args = ["reset", PIPELINE, "--computation", "count-words", "--to", "earliest", "--wipe-state",
            "--bootstrap", "b:9092"]  # fmt: skip
    assert main(args) == code
    assert [c["dry_run"] for c in calls] == dry_runs
    out, err = capsys.readouterr()
    assert out.startswith("would: seek words[0] to 0\nwould: empty the local state\n")
    assert "wipe count-words's state on b:9092? [y/N]" in out
    assert (err == "nothing done\n") is (code == 1)


def test_yes_wipes_without_asking_even_at_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    calls = resets(monkeypatch)
    args = ["reset", PIPELINE, "--computation", "count-words", "--to", "earliest", "--wipe-state",
            "--yes", "--bootstrap", "b:9092"]  # fmt: skip
    assert main(args) == 0
    assert [c["dry_run"] for c in calls] == [False]
    assert "[y/N]" not in capsys.readouterr().out


def test_reset_needs_a_computation_and_a_point(capsys):
    err = usage_error(capsys, "reset", PIPELINE, "--to", "earliest")
    assert "the following arguments are required: --computation" in err
    err = usage_error(capsys, "reset", PIPELINE, "--computation", "c")
    assert "the following arguments are required: --to" in err


# -- backfill ----------------------------------------------------------------------------------


def test_backfill_runs_the_computation_over_the_range_and_prints_its_summary(
    monkeypatch, capsys, tmp_path
):
    config = tmp_path / "c.toml"
    config.write_text('[kafka]\nacks = "all"\n[spark]\n"spark.executor.cores" = "2"\n'
                      '[registry]\nurl = "http://127.0.0.1:8081"\n')  # fmt: skip
    summary = SimpleNamespace(line=lambda group: f"backfill {group}: 10 records in")
    calls = record(monkeypatch, BACKFILL, returns=summary)
    args = ["backfill", PIPELINE, "--computation", "count-words", "--from",
            "2026-01-01T00:00:00Z", "--until", "2026-02-01T00:00:00Z", "--master",
            "spark://m:7077", "--tasks", "16", "--bootstrap", "b:9092",
            "--config", str(config)]  # fmt: skip
    assert main(args) == 0
    (pipeline, computation), kwargs = calls.one
    assert (pipeline.name, computation) == ("wordcount", "count-words")
    registry = kwargs.pop("registry")
    assert registry.url == "http://127.0.0.1:8081"
    assert kwargs == {"bootstrap": "b:9092", "start": "2026-01-01T00:00:00Z",
                      "until": "2026-02-01T00:00:00Z", "master": "spark://m:7077",
                      "spark_conf": {"spark.executor.cores": "2"}, "kafka": {"acks": "all"},
                      "tasks": 16, "progress": False}  # fmt: skip
    assert capsys.readouterr().out == "backfill wordcount.count-words: 10 records in\n"


def test_backfill_by_default_covers_all_history_on_a_local_spark(monkeypatch):
    summary = SimpleNamespace(line=lambda group: "")
    calls = record(monkeypatch, BACKFILL, returns=summary)
    assert main(["backfill", PIPELINE, "--computation", "count-words", "--bootstrap", "b:1"]) == 0
    _, kwargs = calls.one
    assert (kwargs["start"], kwargs["until"], kwargs["master"], kwargs["tasks"]) == (
        "earliest", "latest", "local[*]", None,
    )  # fmt: skip
    assert (kwargs["registry"], kwargs["spark_conf"], kwargs["kafka"]) == (None, {}, {})


def test_backfill_refuses_a_task_count_that_is_not_a_number(capsys):
    err = usage_error(capsys, "backfill", PIPELINE, "--computation", "c", "--tasks", "many")
    assert "argument --tasks: invalid int value: 'many'" in err
