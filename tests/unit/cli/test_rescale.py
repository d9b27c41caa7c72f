"""`logwheel rescale` (framework/cli/rescale.py): the options it requires, its defaults, and what
it hands the rescale (the loaded pipeline, the computation and count, the bootstrap, --config's
[spark] and [kafka] tables, the master, --dry-run), each line the rescale reports printed. The
rescale itself is tested in tests/unit/rescale and tests/integration/test_rescale.py."""

from __future__ import annotations

import pytest

from framework.cli.main import main
from tests.unit.cli.recording import PIPELINE, record

pytestmark = pytest.mark.usefixtures("no_broker")
RESCALE = "framework.rescale.command.rescale"


def test_the_rescale_gets_the_pipeline_the_count_and_the_config_files_tables(
    monkeypatch, tmp_path, capsys
):
    config = tmp_path / "c.toml"
    config.write_text('[kafka]\nacks = "all"\n[spark]\n"spark.executor.memory" = "2g"\n')
    calls = record(monkeypatch, RESCALE)
    args = ["rescale", PIPELINE, "--computation", "count-words", "--partitions", "8",
            "--master", "spark://m:7077", "--dry-run", "--bootstrap", "b:9092",
            "--config", str(config)]  # fmt: skip
    assert main(args) == 0
    (pipeline, computation, partitions), kwargs = calls.one
    assert (pipeline.name, computation, partitions) == ("wordcount", "count-words", 8)
    report = kwargs.pop("report")
    assert kwargs == {"bootstrap": "b:9092", "master": "spark://m:7077", "dry_run": True,
                      "spark_conf": {"spark.executor.memory": "2g"},
                      "kafka": {"acks": "all"}}  # fmt: skip
    report("would: stage 4 -> 8 partitions")
    assert capsys.readouterr().out == "would: stage 4 -> 8 partitions\n"


def test_by_default_it_runs_for_real_on_a_local_spark(monkeypatch):
    monkeypatch.setenv("LOGWHEEL_BOOTSTRAP", "env:9092")
    calls = record(monkeypatch, RESCALE)
    assert main(["rescale", PIPELINE, "--computation", "count-words", "--partitions", "2"]) == 0
    _, kwargs = calls.one
    assert (kwargs["bootstrap"], kwargs["master"], kwargs["dry_run"]) == (
        "env:9092", "local[*]", False,
    )  # fmt: skip
    assert (kwargs["spark_conf"], kwargs["kafka"]) == ({}, {})


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--partitions", "8"], "the following arguments are required: --computation"),
        (["--computation", "c"], "the following arguments are required: --partitions"),
        (["--computation", "c", "--partitions", "eight"], "invalid int value: 'eight'"),
    ],
)
def test_the_computation_and_a_whole_count_are_required(capsys, args, says):
    with pytest.raises(SystemExit) as usage:
        main(["rescale", PIPELINE, *args])
    assert usage.value.code == 2 and says in capsys.readouterr().err


def test_a_refusal_of_the_rescale_is_one_line(monkeypatch, capsys):
    from framework.core.pipeline import PipelineError

    refusal = PipelineError("rescale c: its group has live members: stop them first")
    record(monkeypatch, RESCALE, raises=refusal)
    args = ["rescale", PIPELINE, "--computation", "c", "--partitions", "8", "--bootstrap", "b:1"]
    assert main(args) == 1
    assert capsys.readouterr().err == f"logwheel: {refusal}\n"
