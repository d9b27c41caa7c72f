"""The enrich job in the Harness: profiles as state, the join through ctx.table."""

from __future__ import annotations

import pytest

from framework.testing import Harness
from jobs.enrich import pipeline


def test_profiles_keep_versions_and_delete():
    h = Harness(pipeline, "profiles")
    h.send("profile-updates", "", {"user": "u1", "name": "Ann", "country": "FR"}, 0)
    h.send("profile-updates", "", {"user": "u1", "country": "DE"}, 1)
    assert h.state("u1") == {"name": "Ann", "country": "DE", "version": 2}
    h.send("profile-updates", "", {"user": "u1", "delete": True}, 2)
    assert h.state("u1") == {}


def test_enrich_joins_with_the_table_as_of_each_call():
    h = Harness(pipeline, "enrich")
    h.send("page-views", "", {"id": "1", "user": "u1", "url": "/a"}, 0)
    h.set_table("profiles", "u1", {"name": "Ann", "country": "FR", "version": 1})
    h.send("page-views", "", {"id": "2", "user": "u1", "url": "/b"}, 1)
    h.set_table("profiles", "u1", None)
    h.send("page-views", "", {"id": "3", "user": "u1", "url": "/c"}, 2)
    got = [(r.value["id"], r.value["country"]) for r in h.outputs("enriched-page-views")]
    assert got == [("1", None), ("2", "FR"), ("3", None)]


def test_an_undeclared_table_names_the_fix():
    h = Harness(pipeline, "profiles")
    with pytest.raises(ValueError, match="declares no table 'nope'"):
        h.set_table("nope", "k", {})
