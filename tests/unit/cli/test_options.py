"""Destructive commands ask first: --yes goes on, a terminal is asked, a script gets the
command's own default (reset proceeds, a demo on another cluster refuses)."""

from __future__ import annotations

import io

import pytest

from framework.cli.main import build_parser
from framework.cli.options import confirmed


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("answer, goes_on", [("y\n", True), ("yes\n", True), ("\n", False),
                                             ("n\n", False), ("", False)])  # fmt: skip
def test_a_terminal_is_asked(monkeypatch, capsys, answer, goes_on):
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    assert confirmed("wipe it?", yes=False, unattended=True) is goes_on
    assert "wipe it? [y/N]" in capsys.readouterr().out


def test_yes_skips_the_question_and_a_script_gets_the_default(monkeypatch):
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert confirmed("wipe it?", yes=True, unattended=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal
    assert confirmed("wipe it?", yes=False, unattended=True)
    assert not confirmed("wipe it?", yes=False, unattended=False)


def test_metrics_are_served_on_loopback_unless_an_address_is_chosen(monkeypatch):
    parser = build_parser()
    monkeypatch.delenv("LOGWHEEL_METRICS_ADDR", raising=False)
    assert parser.parse_args(["run", "m:p"]).metrics_addr == "127.0.0.1"
    args = parser.parse_args(["run", "m:p", "--metrics-addr", "0.0.0.0"])
    assert args.metrics_addr == "0.0.0.0"
    reset = parser.parse_args(["reset", "m:p", "--computation", "c", "--to", "earliest", "--yes"])
    assert reset.yes
