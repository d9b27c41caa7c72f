"""The stream-table join end to end: what `make enrich-demo` shows, as a test."""

from __future__ import annotations

import pytest

from jobs.enrich import demo

pytestmark = pytest.mark.timeout(300)


def test_demo_enriches_each_view_with_the_profile_as_of_its_processing(kafka, capsys):
    assert demo.main(["--bootstrap", kafka, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "view  1 by ann  -> Ann, FR" in out and "view  5 by ann  -> Ann, DE" in out
