"""The dashboard's server on loopback, with figures from a stand-in look at the cluster: the
page's files from the package, the last figures as JSON, a failed look said on the page."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from framework import Computation, Pipeline
from framework.ops.dashboard import Facts
from framework.ops.dashboard_server import Figures, make_server
from framework.ops.status import Status

NOW = 1_800_000_000_000


def small_pipeline() -> Pipeline:
    pipeline = Pipeline("p", partitions=1)
    pipeline.source("in")
    pipeline.computation("c", Computation, inputs={"in": None})
    return pipeline


class Looks:
    """Looks at a stand-in cluster: each a step later; `fail` makes the next one raise."""

    def __init__(self) -> None:
        self.count = 0
        self.fail = False

    def __call__(self) -> Facts:
        if self.fail:
            raise ConnectionError("the cluster does not answer")
        self.count += 1
        row = Status("c", "in", 0, NOW - 1_000, 1_000, 0, NOW, "p.c.x", offset=self.count)
        return Facts(NOW + self.count * 1_000, [row])


@pytest.fixture
def served() -> Iterator[tuple[str, Figures, Looks]]:
    pipeline = small_pipeline()
    looks = Looks()
    figures = Figures(pipeline, "m:pipeline", looks)  # not started: refreshed by hand
    figures.refresh()
    server = make_server(figures, 0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", figures, looks
    finally:
        server.shutdown()
        server.server_close()


def fetch(url: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.headers["Content-Type"], answer.read()


def test_the_page_and_its_files_come_from_the_package(served):
    url, _, _ = served
    kind, page = fetch(url)
    assert kind.startswith("text/html") and b'<script src="app.js">' in page
    assert fetch(url + "app.js")[0].startswith("text/javascript")
    assert b"svg#graph" in fetch(url + "style.css")[1]
    with pytest.raises(urllib.error.HTTPError) as missing:
        fetch(url + "../pyproject.toml")
    assert missing.value.code == 404


def test_the_api_answers_the_last_figures_and_a_failed_look_keeps_them_saying_why(served):
    url, figures, looks = served
    first = json.loads(fetch(url + "api/pipeline")[1])
    assert first["now"] == NOW + 1_000 and "error" not in first
    figures.refresh()
    second = json.loads(fetch(url + "api/pipeline")[1])
    (row,) = second["computations"][0]["partitions"]
    assert second["now"] == NOW + 2_000 and row["records_per_second"] == 1.0
    looks.fail = True
    figures.refresh()
    third = json.loads(fetch(url + "api/pipeline")[1])
    assert third["error"] == "the cluster does not answer" and third["now"] == NOW + 2_000


def test_the_server_listens_on_loopback_only():
    pipeline = small_pipeline()
    server = make_server(Figures(pipeline, "m:pipeline", Looks()), 0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_a_first_look_that_fails_still_answers_the_graph():
    pipeline = small_pipeline()
    looks = Looks()
    looks.fail = True
    figures = Figures(pipeline, "m:pipeline", looks)
    figures.refresh()
    answer = json.loads(figures.answer(timeout=1))
    assert answer["error"] == "the cluster does not answer"
    assert {n["id"] for n in answer["graph"]["nodes"]} == {"s:in", "c:c"}
    assert answer["computations"][0]["partitions"] == []


def test_a_taken_port_is_refused_in_one_line_naming_the_fix(served):
    from framework.errors import ConfigurationError

    url, figures, _ = served
    taken = int(url.rsplit(":", 1)[1].strip("/"))
    with pytest.raises(ConfigurationError, match="give another port with --port N"):
        make_server(figures, taken)
