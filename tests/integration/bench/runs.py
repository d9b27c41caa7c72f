"""Running a benchmark's reduced run (its `QUICK_ARGS`) on the session's broker, for the tests
of tests/integration/bench/ (one file per benchmark, so that make test's workers share them).
No figure is asserted against a bound: the machine is shared and noisy, and `make bench` is
where the figures are read; what is asserted is that the run exits 0, its outputs passed the
check against their reference (bench/verify.py), and it wrote the rows it should."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from tests.support import REPO

CHECK = {"missing": 0, "unexpected": 0, "duplicated": 0, "late": 0}


def load(name: str) -> ModuleType:
    """bench/<name>.py, imported by path (as a script runs it)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def quick_run(name: str, kafka: str, tmp_path: Path, *args: str) -> tuple[ModuleType, dict]:
    """The benchmark's reduced run (and `args`): it exits 0 and its check passed."""
    module = load(name)
    out = tmp_path / f"{name}.json"
    assert module.main([*module.QUICK_ARGS, *args, "--bootstrap", kafka, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == name and report["bootstrap"] == kafka
    assert report["failed"] == []
    return module, report


def checked(row: dict) -> dict:
    """A row's four check counts (bench/verify.py)."""
    return {k: row[k] for k in CHECK}
