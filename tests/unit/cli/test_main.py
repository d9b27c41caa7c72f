"""`logwheel` itself (cli/main.py): every command registered, the exit code a command returns,
and an error the user acts on (bad configuration, a reason to stop, a cluster or service
that does not answer) printed as one line with exit 1, without a traceback; anything else
is a bug and keeps its traceback."""

from __future__ import annotations

import argparse

import pytest

from framework.cli import main as cli
from framework.errors import ConfigurationError, Fatal, Rejoin, Retry
from framework.kafka.errors import Unreachable

COMMANDS = {
    "broker", "registry", "run", "topics", "status", "graph", "changelog", "reset", "backfill",
    "schemas", "acls", "jars", "ui", "state", "dlq", "rescale",
}  # fmt: skip


def test_every_command_of_the_contract_is_registered():
    parser = cli.build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == COMMANDS


def with_command(monkeypatch, run) -> None:
    """`logwheel graph X` runs `run(args)` instead of drawing a graph."""

    def register(commands):
        commands.add_parser("graph").add_argument("ref")
        commands.choices["graph"].set_defaults(func=run)

    monkeypatch.setattr(cli, "COMMANDS", [register])


def test_the_commands_exit_code_is_the_processes(monkeypatch):
    with_command(monkeypatch, lambda args: 3 if args.ref == "x" else 0)
    assert cli.main(["graph", "x"]) == 3
    assert cli.main(["graph", "y"]) == 0


@pytest.mark.parametrize(
    "error",
    [
        ConfigurationError("--to soon: give a time zone"),
        Fatal("on_error=stop: the hook raised"),
        Unreachable("topics ['a'] have no partition leaders after 30s"),
        Retry("waiting for ['b']"),
    ],
)
def test_an_error_the_user_acts_on_is_one_line_and_exit_one(monkeypatch, capsys, error):
    def fail(args):
        raise error

    with_command(monkeypatch, fail)
    assert cli.main(["graph", "x"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"logwheel: {error}\n"


@pytest.mark.parametrize("error", [Rejoin("fenced"), KeyError("bug")])
def test_anything_else_is_a_bug_and_keeps_its_traceback(monkeypatch, error):
    def fail(args):
        raise error

    with_command(monkeypatch, fail)
    with pytest.raises(type(error)):
        cli.main(["graph", "x"])


def test_ctrl_c_ends_with_the_shells_code_for_it(monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    with_command(monkeypatch, interrupted)
    assert cli.main(["graph", "x"]) == 130


def test_a_bad_port_in_the_environment_is_one_line_too(monkeypatch, capsys):
    monkeypatch.setenv("LOGWHEEL_METRICS_PORT", "ninety")
    assert cli.main(["run", "jobs.wordcount:pipeline"]) == 1
    assert capsys.readouterr().err == (
        "logwheel: LOGWHEEL_METRICS_PORT='ninety': give a port number\n"
    )


def test_a_wrong_command_line_is_argparses_usage_and_exit_two(capsys):
    with pytest.raises(SystemExit) as usage:
        cli.main(["nonsense"])
    assert usage.value.code == 2
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err
