"""The layering of framework/, changelog/ and jobs/ (pyproject's import-linter contracts): the
tree as it is keeps every contract, and a module importing the wrong way breaks the one it
should."""

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
    for package in ("framework", "changelog", "jobs"):
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_tree_keeps_every_layering_contract(tmp_path):
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


DOWNWARD = "Packages import only downward"
PYSPARK = "Only the backfill and changelog.spark import pyspark, an extra"
CYCLES = "No import cycles, between packages or within one"


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        ("framework/core/wrong_way.py", "from framework.streaming import membership\n", DOWNWARD),
        (
            "framework/core/wrong_way.py",
            "import confluent_kafka\n",
            "The core knows nothing of Kafka clients, RocksDB or Spark",
        ),
        (
            "framework/backfill/wrong_way.py",
            "from framework.streaming import task\n",
            "The backfill runs hooks through the core, not the streaming runtime",
        ),
        ("framework/state/wrong_way.py", "import pyspark\n", PYSPARK),
        ("framework/cli/wrong_way.py", "import pyspark\n", PYSPARK),
        ("changelog/store.py", "import pyspark\n", PYSPARK),
        ("jobs/wordcount/__init__.py", "import pyspark\n", PYSPARK),
        ("framework/kafka/wrong_way.py", "from framework.cli import main\n", DOWNWARD),
        # changelog sits under the CLI that prints it: importing the CLI back is a loop
        ("changelog/store.py", "from framework.cli import data\n", DOWNWARD),
        ("framework/kafka/wrong_way.py", "import changelog\n", DOWNWARD),
        ("framework/streaming/wrong_way.py", "import jobs.wordcount\n", DOWNWARD),
        ("changelog/store.py", "import jobs.enrich\n", DOWNWARD),
        (
            "jobs/wordcount/__init__.py",
            "from framework.core.api import Computation\n",
            "A job's pipeline uses framework's public API",
        ),
        ("framework/streaming/meter.py", "from framework.streaming import membership\n", CYCLES),
        ("jobs/demo.py", "import jobs.zeitgeist.demo\n", CYCLES),
    ],
)
def test_a_module_importing_the_wrong_way_breaks_its_contract(tmp_path, module, source, contract):
    root = _copy(tmp_path)
    path = root / module
    path.write_text(source + (path.read_text() if path.exists() else ""))
    result = _lint(root)
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout, result.stdout
