"""Bad configuration fails `logwheel run` at start, in one line that names the fix."""

from __future__ import annotations

import pytest

from framework import Computation
from framework.cli.main import main
from framework.core.pipeline import Pipeline


class Broken(Computation):
    def __init__(self) -> None:
        raise ValueError("no model file")

    def process_record(self, ctx, record): ...


broken = Pipeline("broken")
broken.source("in")
broken.computation("c", Broken, inputs={"in": None})


def run(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["run", *args, "--bootstrap", "127.0.0.1:1"])
    return code, capsys.readouterr().err.strip().splitlines()


def test_computation_that_cannot_be_created(capsys, tmp_path):
    code, err = run(capsys, "tests.unit.cli.test_run:broken", "--state-dir", str(tmp_path))
    assert code == 1
    assert len(err) == 1 and "cannot be created (ValueError: no model file)" in err[0]


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        ("no_such_module:pipeline", "cannot import 'no_such_module'"),
        ("tests.unit.cli.test_run", "must be MODULE:ATTR"),
        ("tests.unit.cli.test_run:Broken", "is not a logwheel Pipeline"),
        ("tests.unit.cli.test_run:broken --computation nope", "has no computation or sink 'nope'"),
    ],
)
def test_bad_references(capsys, tmp_path, ref, says):
    code, err = run(capsys, *ref.split(), "--state-dir", str(tmp_path))
    assert code == 1 and len(err) == 1 and says in err[0], err


def test_a_commit_interval_that_is_not_positive(capsys, tmp_path):
    args = ("tests.unit.cli.test_run:broken", "--state-dir", str(tmp_path))
    code, err = run(capsys, *args, "--commit-interval-ms", "0")
    assert code == 1
    assert len(err) == 1 and "--commit-interval-ms 0: give milliseconds > 0" in err[0]
