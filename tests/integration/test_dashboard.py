"""`logwheel ui` on a real broker, read by a real browser: one small job (a re-keying count
that fails on a poison record, and a window after it), the page's server as the user starts
it, and Debian's Chromium driven by Playwright. `/api/pipeline` carries exactly the figures
of `logwheel status --json`; the page draws the graph, shows the poison record's dead letter
with the command that replays it, and flags the partition that holds the watermark back (its
records are an hour older than the other partition's). The page's screenshot is kept at
`.logwheel/test-output/dashboard.png` (docs/dashboard.png is a copy)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from framework.core.clock import now_ms
from framework.kafka.topics import create_topics
from framework.ops.dashboard import status_rows
from tests.support import REPO, Job, import_job, job_source, unique_name, wait_for, write_job

pytestmark = pytest.mark.timeout(300)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = REPO / ".logwheel" / "test-output" / "dashboard.png"

JOB = """
from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by, windows


class Count(Computation):
    def process_record(self, ctx, record):
        if record.value.get("poison"):
            raise ValueError("a poison record")
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        ctx.produce(NAME + "-counts", {"user": ctx.key, "n": ctx.state["n"]})


pipeline = Pipeline(NAME, partitions=2)
pipeline.source(NAME + "-clicks", watermark=BoundedOutOfOrderness(ms=0, idle_ms=600_000))
pipeline.computation(
    "count", Count, inputs={NAME + "-clicks": key_by("user")}, outputs={NAME + "-counts": None}
)
pipeline.windowed(
    "per-minute",
    inputs={NAME + "-counts": None},
    window=windows.Tumbling(size_ms=60_000),
    aggregate=windows.Count(),
    output=NAME + "-per-minute",
)
"""
HOUR = 3_600_000


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


class Dashboard:
    """The job, its input written, and `logwheel ui` serving it."""

    def __init__(self, kafka: str, tmp: Path) -> None:
        self.kafka, self.tmp = kafka, tmp
        self.name = unique_name("dash")
        self.module = write_job(tmp, self.name.replace("-", "_"), job_source(JOB, NAME=self.name))
        self.ref = f"{self.module}:pipeline"
        self.pipeline = import_job(tmp, self.module).pipeline
        self.env = {"PYTHONPATH": f"{tmp}:{REPO}", "PATH": "/usr/bin:/bin"}
        create_topics(kafka, self.pipeline)
        self.job = Job(self.ref, bootstrap=kafka, state_dir=tmp / "state", path=tmp)
        self.ui: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> Dashboard:
        self.job.start().wait_working(computations=2)
        now = now_ms()
        producer = Producer({"bootstrap.servers": self.kafka})
        clicks = f"{self.name}-clicks"
        for i in range(6):  # partition 0 is current, partition 1 an hour behind
            for partition, ts in ((0, now - 1_000 + i), (1, now - HOUR + i)):
                value = {"user": f"u{i % 3}"}
                producer.produce(clicks, json.dumps(value).encode(), partition=partition,
                                 timestamp=ts)  # fmt: skip
        producer.produce(clicks, b'{"user": "u9", "poison": true}', partition=0, timestamp=now)
        producer.flush(30)
        with open(self.tmp / "ui.log", "wb") as log:  # the child keeps its own descriptor
            self.ui = subprocess.Popen(
                [sys.executable, "-m", "framework.cli", "ui", self.ref, "--port", "0",
                 "--bootstrap", self.kafka],
                stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO, env=self.env,
            )  # fmt: skip
        line = self.ui.stdout.readline()
        assert line.startswith("logwheel ui: http://127.0.0.1:"), (line, self.log())
        self.url = line.split(": ", 1)[1].strip()
        return self

    def api(self) -> dict:
        return get(self.url + "api/pipeline")

    def status(self) -> list[dict]:
        out = subprocess.run(
            [sys.executable, "-m", "framework.cli", "status", self.ref, "--json",
             "--bootstrap", self.kafka],
            capture_output=True, text=True, check=True, cwd=REPO, env=self.env,
        )  # fmt: skip
        return [json.loads(line) for line in out.stdout.splitlines()]

    def log(self) -> str:
        return (self.tmp / "ui.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.ui is not None:
            self.ui.terminate()
            assert self.ui.wait(30) == 0, self.log()  # SIGTERM ends it cleanly
        self.job.stop()


def settled(api: dict) -> bool:
    """Everything read and processed (the window's input too), every watermark known."""
    rows = [r for c in api.get("computations", ()) for r in c["partitions"]]
    return len(rows) == 6 and all(r["consumer_lag"] == 0 and r["low_watermark"] for r in rows)


@pytest.fixture(scope="module")
def dashboard(kafka, tmp_path_factory) -> Iterator[Dashboard]:
    board = Dashboard(kafka, tmp_path_factory.mktemp("dashboard")).start()
    try:
        wait_for(lambda: settled(board.api()), 120, 0.5, what="the job to settle on the page")
        yield board
    finally:
        board.stop()


def without_lag(rows: list[dict]) -> list[dict]:
    """Rows without `lag_ms`, which is wall time less the watermark: it moves every moment."""
    return sorted(
        ({k: v for k, v in r.items() if k != "lag_ms"} for r in rows),
        key=lambda r: (r["computation"], r["topic"], r["partition"]),
    )


def test_the_json_carries_exactly_the_figures_of_logwheel_status(dashboard):
    def agreed():
        before = without_lag(dashboard.status())
        asked = now_ms()
        api = wait_for(lambda: (a := dashboard.api())["now"] > asked and a, 30, 0.2,
                       what="the page's next look at the cluster")  # fmt: skip
        after = without_lag(dashboard.status())
        # the page looked between two `logwheel status` that agree: nothing moved meanwhile
        return before == after and (api, before)

    api, expected = wait_for(agreed, 90, 0.5, what="two equal `logwheel status` in a row")
    rows = status_rows(api)
    assert without_lag(rows) == expected
    assert len(rows) == 2 * 2 + 2  # count: clicks and clicks' by-key topic; per-minute: counts
    for row in rows:  # the lag is the same arithmetic, at the page's moment
        assert row["lag_ms"] == api["now"] - row["low_watermark"]
    held = {(r["topic"], r["partition"]) for c in api["computations"] for r in c["partitions"]
            if r["holding_back"]}  # fmt: skip
    assert held == {(f"{dashboard.name}-clicks", 1)}
    by_key = [r for r in rows if r["topic"].endswith(".by-key")]
    assert {r["held_back_by"] for r in by_key} == {f"count/by-key/{dashboard.name}-clicks/1"}


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: apt-get install -y chromium")
def test_the_page_draws_the_graph_a_dead_letter_and_a_held_back_partition(dashboard):
    from playwright.sync_api import sync_playwright

    api = dashboard.api()
    clicks = f"{dashboard.name}-clicks"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            page.set_default_timeout(10_000)
            page.goto(dashboard.url)
            page.wait_for_selector("body[data-loaded]", timeout=30_000)
            # the graph, drawn: a shape per node, a path per edge, each kind in its place
            kinds = {n["id"]: n["kind"] for n in api["graph"]["nodes"]}
            assert page.locator("#graph g.node").count() == len(kinds) == 5
            assert page.locator("#graph path.edge").count() == len(api["graph"]["edges"]) == 4
            drawn = page.eval_on_selector_all(
                "#graph g.node", "gs => gs.map(g => [g.dataset.id, g.dataset.kind])"
            )
            assert dict(drawn) == kinds
            assert sorted(kinds.values()) == ["computation", "source", "stream", "stream", "window"]
            box = page.locator('#graph g.node[data-id="c:count"]').bounding_box()
            assert box is not None and box["width"] > 50 and box["height"] > 20
            # the poison record's dead letter, with the command that replays it
            card = page.locator("#computation-count")
            stage = card.locator('.dead-letters tr[data-stage="process_record"]')
            assert stage.locator(".count").inner_text() == "1"
            command = stage.locator("code.replay").inner_text()
            assert command.startswith(f"logwheel dlq replay {dashboard.ref} --computation count")
            assert "--stage process_record" in command
            badge = page.locator('#graph g.node[data-id="c:count"] .dead-letter-badge')
            assert badge.text_content() == "1"
            # the partition an hour behind: flagged in its row and on the graph
            behind = card.locator(f'tr.partition[data-topic="{clicks}"][data-partition="1"]')
            assert behind.get_attribute("data-held-back") == "true"
            assert "holds the watermark back" in behind.inner_text()
            ahead = card.locator(f'tr.partition[data-topic="{clicks}"][data-partition="0"]')
            assert ahead.get_attribute("data-held-back") == "false"
            keyed = card.locator("tr.partition td.held-back-by")
            assert f"{clicks}[1]" in keyed.all_inner_texts()
            assert "held-back" in page.locator(
                f'#graph g.node[data-id="s:{clicks}"]'
            ).get_attribute("class")
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            print(f"dashboard screenshot: {SCREENSHOT}")
        finally:
            browser.close()
