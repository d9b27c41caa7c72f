"""framework.core.logs: JSON lines carry the fields, the format resolves from the flag or the
environment, a bad name fails in one line, and the rate-limited logger folds repeats."""

from __future__ import annotations

import io
import json
import logging

import pytest

from framework.core.logs import RateLimited, resolve_format, setup
from framework.errors import ConfigurationError


@pytest.fixture
def restore_root():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_json_lines_have_time_level_logger_message_and_fields(restore_root):
    out = io.StringIO()
    assert setup("json", stream=out) == "json"
    logging.getLogger("logwheel.test").warning("assigned %d partitions", 3, extra={"topic": "t"})
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("logwheel.test").exception("failed")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["level"] == "WARNING"
    assert first["logger"] == "logwheel.test"
    assert first["message"] == "assigned 3 partitions"
    assert first["topic"] == "t"
    assert first["time"].endswith("+00:00")
    assert "ValueError: boom" in second["exception"]


def test_plain_is_the_default_and_the_environment_picks_otherwise(monkeypatch, restore_root):
    monkeypatch.delenv("LOGWHEEL_LOG_FORMAT", raising=False)
    assert resolve_format(None) == "plain"
    monkeypatch.setenv("LOGWHEEL_LOG_FORMAT", "json")
    assert resolve_format(None) == "json"
    assert resolve_format("plain") == "plain"
    out = io.StringIO()
    setup("plain", stream=out)
    logging.getLogger("x").info("hello")
    assert out.getvalue().rstrip().endswith("INFO x: hello")


def test_an_unknown_format_fails_naming_the_choices(monkeypatch):
    monkeypatch.setenv("LOGWHEEL_LOG_FORMAT", "xml")
    with pytest.raises(ConfigurationError, match="plain or json"):
        resolve_format(None)


def test_rate_limited_writes_one_line_per_reason_per_interval_with_a_count(restore_root):
    out = io.StringIO()
    setup("json", stream=out)
    now = [0.0]
    limited = RateLimited(logging.getLogger("dl"), interval=60, clock=lambda: now[0])
    assert limited.log("ValueError", "dead letter: %s", "ValueError")
    for _ in range(4):
        assert not limited.log("ValueError", "dead letter: %s", "ValueError")
    assert limited.log("KeyError", "dead letter: %s", "KeyError")  # another reason: its own line
    now[0] = 61.0
    assert limited.log("ValueError", "dead letter: %s", "ValueError", stage="decode")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["key"], line["count"]) for line in lines] == [
        ("ValueError", 1),
        ("KeyError", 1),
        ("ValueError", 5),
    ]
    assert lines[2]["message"] == "dead letter: ValueError (5 since the last report)"
    assert lines[2]["stage"] == "decode"
