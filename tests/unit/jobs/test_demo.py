"""A demo deletes its topics before it starts: it does so on the embedded broker alone, unless
a cluster is named (--bootstrap or LOGWHEEL_BOOTSTRAP) and the user confirms or gave --yes."""

from __future__ import annotations

import argparse
import io

import pytest

from jobs import demo
from jobs.zeitgeist import pipeline


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_target(parser)
    return parser.parse_args(argv)


@pytest.fixture(autouse=True)
def embedded(monkeypatch):
    monkeypatch.delenv("LOGWHEEL_BOOTSTRAP", raising=False)
    monkeypatch.setattr(demo, "ensure_running", lambda: "127.0.0.1:embedded")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # a script: no terminal


def test_without_a_named_cluster_a_demo_uses_the_embedded_broker():
    assert demo.demo_bootstrap(args(), pipeline) == "127.0.0.1:embedded"


def test_a_named_cluster_needs_yes_from_a_script(monkeypatch):
    with pytest.raises(SystemExit, match="deletes and recreates zeitgeist's topics.*--yes"):
        demo.demo_bootstrap(args("--bootstrap", "prod:9092"), pipeline)
    monkeypatch.setenv("LOGWHEEL_BOOTSTRAP", "prod:9092")
    with pytest.raises(SystemExit, match="on prod:9092: not confirmed"):
        demo.demo_bootstrap(args(), pipeline)
    assert demo.demo_bootstrap(args("--yes"), pipeline) == "prod:9092"
    assert demo.demo_bootstrap(args("--bootstrap", "b:1", "--yes"), pipeline) == "b:1"
