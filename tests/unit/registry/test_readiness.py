"""When the registry is ready: its Confluent-compatible API lists its subjects (an open port,
an error or another answer is not enough), reached directly even with a proxy configured."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from framework.jvm.process import any_free_port
from framework.registry.readiness import answers


def _serving(status: int, body: object) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server interface
            ok = self.path == "/subjects" and "schemaregistry" in self.headers["Accept"]
            self.send_response(status if ok else 404)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode() if ok else b"")

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(status: int, body: object) -> str:
        server = _serving(status, body)
        servers.append(server)
        return next(server)

    yield start
    for server in servers:
        server.close()


def test_a_registry_that_lists_its_subjects_is_ready(serve):
    assert answers(serve(200, ["orders-value"]))
    assert answers(serve(200, []))


def test_an_error_or_another_answer_is_not_ready(serve):
    assert not answers(serve(503, ["orders-value"]))
    assert not answers(serve(200, {"error_code": 50001}))


def test_nothing_listening_is_not_ready():
    assert not answers(f"http://127.0.0.1:{any_free_port()}", timeout=1.0)


def test_a_proxy_of_the_environment_is_not_used(serve, monkeypatch):
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{any_free_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    urllib.request.install_opener(None)  # a default opener made now would take that proxy
    try:
        assert answers(serve(200, []))
    finally:
        urllib.request.install_opener(None)
