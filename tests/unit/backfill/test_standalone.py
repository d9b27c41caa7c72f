"""The local Spark standalone cluster's pieces around Spark (backfill/standalone.py): the
driver's settings, waiting for the master's UI to count the workers, and stopping a master or
worker with everything it started. A real cluster runs in
tests/integration/test_backfill_standalone.py."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from framework.backfill import standalone
from framework.errors import ConfigurationError


def test_the_driver_holds_the_secret_is_on_loopback_and_executors_import_its_modules(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/repo")
    cluster = standalone.Cluster("spark://127.0.0.1:1", (), "s3cret", "http://127.0.0.1:2")
    conf = standalone.client_conf(cluster)
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.authenticate"] == "true" and conf["spark.authenticate.secret"] == "s3cret"
    assert conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.executorEnv.PYTHONPATH"] == "/repo"
    assert standalone.client_conf(cluster, "/other")["spark.executorEnv.PYTHONPATH"] == "/other"
    monkeypatch.delenv("PYTHONPATH")
    assert "spark.executorEnv.PYTHONPATH" not in standalone.client_conf(cluster)


class MasterUI:
    """The master's web UI: a page first (not JSON yet), then `/json/` with a worker count
    that grows on each request."""

    def __init__(self) -> None:
        self.answers = 0
        ui = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                ui.answers += 1
                body = (
                    b"<html>starting</html>"
                    if ui.answers == 1
                    else json.dumps({"aliveworkers": ui.answers - 2}).encode()
                )
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_cluster_is_ready_once_the_master_counts_every_worker(tmp_path):
    ui = MasterUI()
    try:
        standalone._wait_for_workers(ui.port, 2, tmp_path)
    finally:
        ui.close()
    assert ui.answers == 4  # a page, then 0, 1, 2 workers


def test_a_cluster_that_does_not_start_says_so_with_its_logs(tmp_path, monkeypatch):
    monkeypatch.setattr(standalone, "START_TIMEOUT_S", 1.0)
    (tmp_path / "worker-0.log").write_text("java.net.BindException: Address already in use")
    with pytest.raises(ConfigurationError, match="did not start: worker-0.log: java.net.Bind"):
        standalone._wait_for_workers(standalone.any_free_port(), 1, tmp_path)  # nothing there


def _alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_stopping_a_master_or_worker_stops_what_it_started():
    # a worker and its executor: the executor is in the worker's process group
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $!; wait"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    child = int(proc.stdout.readline())
    assert _alive(child)
    standalone._stop(proc)
    assert proc.returncode is not None
    # the child is reaped by init once its parent is gone; give it a moment on a loaded machine
    for _ in range(100):
        if not _alive(child):
            break
        threading.Event().wait(0.05)
    assert not _alive(child)
    standalone._stop(proc)  # stopping one already gone is nothing
