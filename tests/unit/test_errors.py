"""The one taxonomy of errors (framework/errors.py): every error logwheel defines or raises on
purpose is a `LogwheelError` of the family its caller acts on, keeping the builtin base its
callers catch; the families carry what their handlers read."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import changelog
import framework
from framework.errors import (
    BadRecord,
    ConfigurationError,
    FutureRecord,
    LateRecord,
    LogwheelError,
    Rejoin,
    Retry,
    ServiceUnavailable,
    TaskCorrupted,
    UsageError,
)
from framework.kafka.bounded_calls import LeftBehind
from framework.serde.codecs import DecodeError
from framework.serde.confluent import UnknownSchemaId

REPO = Path(__file__).resolve().parents[2]

# Builtin exceptions raised on purpose that stay builtin, each for its reason: Python's own
# conventions for wrong argument types and for abstract methods, and two ValueErrors caught in
# the very function that raises them (turned into an `EncodeError` naming the field).
BUILTIN_KEPT = {"TypeError", "KeyError", "NotImplementedError"}
CAUGHT_WHERE_RAISED = {("framework/serde/avro_codec.py", "ValueError"): 2}


def _modules() -> list[str]:
    names = []
    for package in (framework, changelog):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(".__main__"):  # importing it runs the command line
                names.append(info.name)
    return names


def _importable(name: str) -> object | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # an extra (pyspark) that is not installed
        return None


def test_every_error_class_logwheel_defines_is_a_logwheel_error():
    defined = {}
    for name in _modules():
        module = _importable(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException):
                defined[f"{name}.{cls.__name__}"] = cls
    assert "framework.kafka.bounded_calls.LeftBehind" in defined  # the scan sees them
    # but the watchdog's interruption, which no `except Exception` in a hook may keep
    assert [n for n, cls in defined.items() if not issubclass(cls, LogwheelError)] == [
        "framework.errors.Abandoned"
    ]
    assert not issubclass(defined["framework.errors.Abandoned"], Exception)


def _raised_builtins(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            builtin = getattr(builtins, getattr(target, "id", ""), None)
            if inspect.isclass(builtin) and issubclass(builtin, BaseException):
                found.append(builtin.__name__)
    return found


def test_nothing_in_framework_or_changelog_raises_a_builtin_error_outside_the_taxonomy():
    unexpected = {}
    for root in ("framework", "changelog"):
        for path in sorted((REPO / root).rglob("*.py")):
            where = str(path.relative_to(REPO))
            raised = [n for n in _raised_builtins(path) if n not in BUILTIN_KEPT]
            for name in set(raised):
                if raised.count(name) != CAUGHT_WHERE_RAISED.get((where, name), 0):
                    unexpected[where, name] = raised.count(name)
    assert unexpected == {}


def test_the_scan_finds_a_builtin_error_raised_on_purpose(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    raise ValueError('x')\n\ndef g():\n    raise TimeoutError\n")
    assert _raised_builtins(path) == ["ValueError", "TimeoutError"]


@pytest.mark.parametrize(
    ("error", "family", "builtin"),
    [
        (ConfigurationError("x"), ConfigurationError, ValueError),
        (UsageError("x"), UsageError, ValueError),
        (UnknownSchemaId(7), DecodeError, LookupError),  # a dead letter, never a retry
        (LeftBehind("x"), Rejoin, TimeoutError),  # new clients: the old one is stuck
    ],
)
def test_errors_a_caller_may_catch_as_builtins_are_still_those(error, family, builtin):
    assert isinstance(error, LogwheelError) and isinstance(error, family)
    assert isinstance(error, builtin)


def test_a_service_away_is_a_retry_naming_the_service_and_never_a_bad_record():
    error = ServiceUnavailable("the Schema Registry at http://r:8081", "timed out")
    assert isinstance(error, Retry) and not isinstance(error, BadRecord)
    assert (error.service, str(error)) == ("the Schema Registry at http://r:8081", "timed out")


def test_a_corrupted_task_names_its_partition():
    error = TaskCorrupted(3, "checkpoint beyond the changelog's end")
    assert error.partition == 3
    assert str(error) == "task 3: checkpoint beyond the changelog's end"


def test_a_bad_record_carries_its_stage_and_cause():
    cause = KeyError("field")
    error = BadRecord("key", "no field", cause)
    assert (error.stage, error.cause, str(error)) == ("key", cause, "no field")
    late = LateRecord("behind the watermark", closes=1000)
    assert (late.stage, late.closes, late.cause) == ("late", 1000, None)
    assert isinstance(FutureRecord("future", "ahead of the clock"), BadRecord)
