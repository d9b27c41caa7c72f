"""`logwheel state get` (framework/cli/state.py): the client it makes from the command line (the
pipeline loaded, the bootstrap, --config, --timeout as its deadline), the question it asks,
the answer printed as one JSON line, and what a bad option or computation gives."""

from __future__ import annotations

import json

import pytest

from framework.cli.main import main
from framework.query import client as client_module
from tests.unit.cli.recording import PIPELINE

pytestmark = pytest.mark.usefixtures("no_broker")

ANSWER = {"key": "café", "value": {"count": 2}, "partition": 1, "instance": "pod-0",
          "served_by": "active", "lag": 0}  # fmt: skip


class Client:
    """A `StateClient` that notes how it was made and asked, and answers ANSWER."""

    made: list[tuple] = []

    def __init__(self, pipeline, **kwargs) -> None:
        self.asked, self.closed = [], False
        Client.made.append((pipeline, kwargs, self))

    def query(self, computation, key, max_lag=None):
        self.asked.append((computation, key, max_lag))
        return ANSWER

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True


@pytest.fixture
def clients(monkeypatch):
    Client.made = []
    monkeypatch.setattr(client_module, "StateClient", Client)
    return Client.made


def test_get_asks_the_owner_through_a_client_of_the_loaded_pipeline_and_prints_one_json_line(
    clients, capsys
):
    args = ["state", "get", PIPELINE, "count-words", "café", "--max-lag", "3", "--timeout", "2.5",
            "--bootstrap", "b:9092", "--config", "c.toml"]  # fmt: skip
    assert main(args) == 0
    [(pipeline, kwargs, client)] = clients
    assert pipeline.name == "wordcount"
    assert kwargs == {"bootstrap": "b:9092", "config": "c.toml", "deadline_s": 2.5}
    assert client.asked == [("count-words", "café", 3)] and client.closed
    out = capsys.readouterr().out
    assert out == json.dumps(ANSWER, ensure_ascii=False) + "\n" and "café" in out


def test_by_default_only_the_owner_answers_within_30_seconds(clients):
    assert main(["state", "get", PIPELINE, "count-words", "ann"]) == 0
    [(_, kwargs, client)] = clients
    assert kwargs == {"bootstrap": None, "config": None, "deadline_s": 30.0}
    assert client.asked == [("count-words", "ann", None)]


def test_a_lag_that_is_not_a_number_is_argparses_usage_error(capsys):
    with pytest.raises(SystemExit) as usage:
        main(["state", "get", PIPELINE, "count-words", "ann", "--max-lag", "soon"])
    assert usage.value.code == 2
    assert "argument --max-lag: invalid int value: 'soon'" in capsys.readouterr().err


def test_an_unknown_computation_is_one_line_naming_those_there_are(capsys):
    code = main(["state", "get", PIPELINE, "count-wrods", "ann", "--bootstrap", "127.0.0.1:1"])
    assert code == 1
    assert capsys.readouterr().err == (
        "logwheel: pipeline 'wordcount' has no computation 'count-wrods'; "
        "it has ['count-words', 'split-words']\n"
    )
