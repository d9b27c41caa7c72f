"""The layering of framework/'s packages (pyproject's import-linter contracts): the tree as it
is keeps every contract, and a module importing the wrong way breaks the one it should."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(
        REPO / "framework", root / "framework", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_tree_keeps_every_layering_contract(tmp_path):
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        (
            "core/wrong_way.py",
            "from framework.streaming import membership\n",
            "Packages import only downward",
        ),
        (
            "core/wrong_way.py",
            "import confluent_kafka\n",
            "The core knows nothing of Kafka clients, RocksDB or Spark",
        ),
        (
            "backfill/wrong_way.py",
            "from framework.streaming import task\n",
            "The backfill runs hooks through the core, not the streaming runtime",
        ),
        ("state/wrong_way.py", "import pyspark\n", "Only the backfill imports pyspark, an extra"),
        (
            "kafka/wrong_way.py",
            "from framework.cli import main\n",
            "Packages import only downward",
        ),
        (
            "streaming/meter.py",
            "from framework.streaming import membership\n",
            "No import cycles, between packages or within one",
        ),
    ],
)
def test_a_module_importing_the_wrong_way_breaks_its_contract(tmp_path, module, source, contract):
    root = _copy(tmp_path)
    path = root / "framework" / module
    path.write_text(source + (path.read_text() if path.exists() else ""))
    result = _lint(root)
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout, result.stdout
