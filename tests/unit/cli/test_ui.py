"""`logwheel ui` (framework/cli/ui.py): what it hands the dashboard's server (the pipeline and
its reference, the bootstrap, the [kafka] table, the port, and the options a replay command it
shows must repeat), its default port, and Ctrl-C ending it with 0. The server itself is tested
in tests/unit/ops/test_dashboard_server.py."""

from __future__ import annotations

import pytest

from framework.cli.main import main
from tests.unit.cli.recording import PIPELINE, record

pytestmark = pytest.mark.usefixtures("no_broker")
SERVE = "framework.ops.dashboard_server.serve"


def test_the_dashboard_is_served_for_the_pipeline_with_the_options_a_replay_must_repeat(
    monkeypatch, tmp_path, capsys
):
    config = tmp_path / "my config.toml"
    config.write_text('[kafka]\n"security.protocol" = "SSL"\n')
    calls = record(monkeypatch, SERVE)
    args = ["ui", PIPELINE, "--port", "0", "--bootstrap", "b:9092", "--config", str(config)]
    assert main(args) == 0
    (pipeline, ref, bootstrap, kafka, port, options), kwargs = calls.one
    assert (pipeline.name, ref, bootstrap, port) == ("wordcount", PIPELINE, "b:9092", 0)
    assert kafka == {"security.protocol": "SSL"}
    assert options == f"--bootstrap b:9092 --config '{config}'"  # quoted for a shell
    kwargs["say"]("serving on http://127.0.0.1:8470")
    assert capsys.readouterr().out == "logwheel ui: serving on http://127.0.0.1:8470\n"


def test_by_default_it_serves_on_its_port_and_a_replay_repeats_no_option(monkeypatch):
    monkeypatch.setenv("LOGWHEEL_BOOTSTRAP", "env:9092")
    calls = record(monkeypatch, SERVE)
    assert main(["ui", PIPELINE]) == 0
    (_, _, bootstrap, kafka, port, options), _ = calls.one
    assert (bootstrap, kafka, port, options) == ("env:9092", {}, 8470, "")


def test_ctrl_c_ends_the_dashboard_with_exit_zero(monkeypatch):
    record(monkeypatch, SERVE, raises=KeyboardInterrupt())
    assert main(["ui", PIPELINE, "--bootstrap", "b:9092"]) == 0


def test_a_port_that_is_not_a_number_is_argparses_usage_error(capsys):
    with pytest.raises(SystemExit) as usage:
        main(["ui", PIPELINE, "--port", "http"])
    assert usage.value.code == 2
    assert "argument --port: invalid int value: 'http'" in capsys.readouterr().err
