"""`logwheel schemas check` and `logwheel changelog dump|follow` (framework/cli/data.py): the exit
code and lines of a check, with and without a registry; what a dump and a follow print from
the table they open, and with what they open it; a dump through Spark, whose session is
stopped whatever happens; and --spark with follow refused in one line. The checks, the table
and the snapshot are tested where they live (tests/unit/serde, tests/unit/kafka,
tests/integration/test_changelog_*.py); `schemas dump` in test_schemas.py."""

from __future__ import annotations

import json

import pytest

import changelog
from framework.cli.main import main
from framework.kafka.registry_compat import RegistryVerdict
from tests.unit.cli.recording import record

pytestmark = pytest.mark.usefixtures("no_broker")
COMPAT = "framework.serde.compat.check"
AGAINST = "framework.kafka.registry_compat.check_against_registry"
URL = "http://127.0.0.1:8081"


def test_a_check_without_problems_exits_zero_and_says_all_compatible(monkeypatch, capsys):
    monkeypatch.delenv("LOGWHEEL_SCHEMA_REGISTRY", raising=False)
    against = record(monkeypatch, AGAINST)
    record(monkeypatch, COMPAT, returns=[])
    assert main(["schemas", "check"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and against == []
    assert out.startswith("schemas: ") and out.endswith(": all compatible\n")


def test_each_incompatible_change_is_a_line_and_the_check_exits_one(monkeypatch, capsys):
    monkeypatch.delenv("LOGWHEEL_SCHEMA_REGISTRY", raising=False)
    record(monkeypatch, COMPAT, returns=["a.B v2: field x removed", "a.C v3: type changed"])
    assert main(["schemas", "check"]) == 1
    out, err = capsys.readouterr()
    assert err == ("logwheel schemas check: a.B v2: field x removed\n"
                   "logwheel schemas check: a.C v3: type changed\n")  # fmt: skip
    assert out.endswith(": 2 incompatible change(s)\n")


@pytest.mark.parametrize("given", ["option", "environment"])
def test_a_registry_given_is_checked_against_too_and_its_problems_fail_the_check(
    monkeypatch, capsys, given
):
    verdict = RegistryVerdict(URL, [("a.B", "clicks-value")], ["a.B against clicks-value: x"])
    against = record(monkeypatch, AGAINST, returns=verdict)
    if given == "option":
        monkeypatch.delenv("LOGWHEEL_SCHEMA_REGISTRY", raising=False)
        assert main(["schemas", "check", "--registry", URL + "/"]) == 1
    else:
        monkeypatch.setenv("LOGWHEEL_SCHEMA_REGISTRY", URL)
        assert main(["schemas", "check"]) == 1
    (_, settings), _ = against.one
    assert settings.url == URL
    out, err = capsys.readouterr()
    assert err == "logwheel schemas check: a.B against clicks-value: x\n"
    assert out.splitlines()[-1] == (
        f"registry {URL}: 1 subject(s) checked (a.B -> clicks-value): 1 incompatible change(s)"
    )


class Table:
    """A `ChangelogTable` holding `rows`, whose follow yields `changes`."""

    made: list[tuple[tuple, dict]] = []
    rows = [("ann", {"n": 2, "at": b"\x00"}), ("bob", None)]
    changes = [("ann", {"n": 2}, {"n": 3}), ("bob", {"n": 1}, None)]

    def __init__(self, *args, **kwargs) -> None:
        Table.made.append((args, kwargs))
        self.caught_up = None

    def catch_up(self, progress=None):
        self.caught_up = progress
        return self

    def items(self):
        return list(self.rows)

    def follow(self):
        yield from self.changes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


@pytest.fixture
def tables(monkeypatch):
    Table.made = []
    monkeypatch.setattr(changelog, "ChangelogTable", Table)
    return Table.made


def lines(capsys) -> list:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_dump_prints_each_keys_latest_value_as_a_json_line(tables, capsys, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[kafka]\n"security.protocol" = "SSL"\n')
    args = ["changelog", "dump", "p.c.changelog", "--bootstrap", "b:9092", "--config", str(config),
            "--registry", URL]  # fmt: skip
    assert main(args) == 0
    assert tables == [(("p.c.changelog",),
                       {"bootstrap": "b:9092", "kafka": {"security.protocol": "SSL"},
                        "registry": URL})]  # fmt: skip
    assert lines(capsys) == [{"key": "ann", "value": {"n": 2, "at": "b'\\x00'"}},
                             {"key": "bob", "value": None}]  # fmt: skip


def test_a_follow_prints_every_change_with_its_old_and_new_value(tables, capsys):
    assert main(["changelog", "follow", "p.c.changelog", "--bootstrap", "b:9092"]) == 0
    assert tables[0][1] == {"bootstrap": "b:9092", "kafka": {}, "registry": None}
    assert lines(capsys) == [{"key": "ann", "old": {"n": 2}, "new": {"n": 3}},
                             {"key": "bob", "old": {"n": 1}, "new": None}]  # fmt: skip


def test_spark_reads_a_snapshot_so_it_is_refused_with_follow(tables, capsys):
    assert main(["changelog", "follow", "t", "--spark", "--bootstrap", "b:9092"]) == 1
    assert capsys.readouterr().err == (
        "logwheel: --spark reads a snapshot: use it with dump, not follow\n"
    )
    assert tables == []


class Spark:
    """A session, and the snapshot it read: `rows`."""

    stopped = False
    rows = [{"key": "ann", "value": '{"n": 2}'}]

    def stop(self):
        self.stopped = True

    def toLocalIterator(self):  # noqa: N802 - Spark's DataFrame method
        return iter(self.rows)


def test_a_dump_through_spark_prints_the_snapshot_and_stops_its_session(monkeypatch, capsys):
    spark = Spark()
    session = record(monkeypatch, "framework.backfill.session.session", returns=spark)
    snapshot = record(monkeypatch, "changelog.spark.read_snapshot", returns=spark)
    args = ["changelog", "dump", "t", "--spark", "--master", "spark://m:7077", "--bootstrap", "b:1"]
    assert main(args) == 0
    assert session.one == (("spark://m:7077", "logwheel-changelog-dump", {}), {})
    assert snapshot.one == ((spark, "t"), {"bootstrap": "b:1", "kafka": {}, "registry": None})
    assert lines(capsys) == [{"key": "ann", "value": {"n": 2}}]
    assert spark.stopped


def test_a_snapshot_that_fails_still_stops_the_spark_session(monkeypatch):
    spark = Spark()
    record(monkeypatch, "framework.backfill.session.session", returns=spark)
    record(monkeypatch, "changelog.spark.read_snapshot", raises=RuntimeError("no such topic"))
    with pytest.raises(RuntimeError):
        main(["changelog", "dump", "t", "--spark", "--bootstrap", "b:1"])
    assert spark.stopped
