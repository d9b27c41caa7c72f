"""What a command loads: the pipeline `MODULE:ATTR` names (found in the current directory, as
`python -m` finds it) and the tables of its TOML config file, each failing in one line that
names the fix. The references' errors through `logwheel run`: tests/unit/cli/test_run.py; the
`${VAR}` expansion of [kafka] and [spark]: tests/unit/kafka/test_config.py."""

from __future__ import annotations

import sys

import pytest

from framework.core.pipeline import PipelineError
from framework.streaming.loading import config_table, load_pipeline, registry_settings


def test_a_pipeline_is_found_in_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "lw_loading_job.py").write_text(
        "from framework import Pipeline\npipeline = Pipeline('found').source('in')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_pipeline("lw_loading_job:pipeline").name == "found"
    assert sys.path[0] == str(tmp_path)
    with pytest.raises(PipelineError, match="is not a logwheel Pipeline"):
        load_pipeline("lw_loading_job:Pipeline")


def test_no_file_or_no_table_is_an_empty_table(tmp_path):
    config = tmp_path / "job.toml"
    config.write_text('[kafka]\n"acks" = "all"\n')
    assert config_table(None, "kafka") == {}
    assert config_table(str(config), "kafka") == {"acks": "all"}
    assert config_table(str(config), "spark") == {}
    assert registry_settings(str(config)) is None and registry_settings(None) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "No such file"),
        ("[kafka\n", "Expected ']'"),
        ("kafka = 3\n", r"\[kafka\] must be a table of settings"),
    ],
    ids=["missing", "not toml", "not a table"],
)
def test_a_config_file_that_cannot_be_used_fails_in_one_line_naming_it(tmp_path, text, says):
    config = tmp_path / "job.toml"
    if text is not None:
        config.write_text(text)
    with pytest.raises(PipelineError, match=says) as error:
        config_table(str(config), "kafka")
    message = str(error.value)
    assert message.startswith(f"--config {config}: ") and "\n" not in message
