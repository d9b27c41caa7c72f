"""Keep-alive connections to query endpoints (framework/query/connections.py), against a small
HTTP/1.1 server on loopback that counts the connections it accepts: one connection reused for
query after query, the settings' token sent with each, a kept connection the other side closed
replaced without the caller seeing it, at most `idle` of them kept, and an endpoint that cannot
be reached `PeerUnreachable`. TLS is tested in test_server.py."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from framework.query.connections import Connections, PeerUnreachable
from framework.query.settings import ServeSettings

TOKEN = "0123456789abcdef-token"


class Echo(BaseHTTPRequestHandler):
    """Answers each GET with its path and headers; `/close` then closes the connection without
    saying so (as a peer's idle timeout does)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the http.server interface
        self.server.connections.add(self.client_address)
        body = json.dumps({"path": self.path, "headers": dict(self.headers)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.path == "/close":
            self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def origin():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    server.connections = set()
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", server.connections
    finally:
        server.shutdown()
        server.server_close()


def echoed(reply) -> dict:
    assert reply.status == 200
    return json.loads(reply.body)


def test_one_connection_serves_query_after_query_each_with_the_token(origin):
    url, accepted = origin
    connections = Connections(ServeSettings(token=TOKEN))
    for n in range(3):
        seen = echoed(connections.get(url, f"/state/c/k{n}", {"X-Logwheel-Hop": "1"}))
        assert seen["path"] == f"/state/c/k{n}"
        assert seen["headers"]["Authorization"] == f"Bearer {TOKEN}"
        assert seen["headers"]["X-Logwheel-Hop"] == "1"
    assert len(accepted) == 1
    connections.close()


def test_a_kept_connection_the_peer_closed_is_replaced_without_the_caller_seeing_it(origin):
    url, accepted = origin
    connections = Connections(ServeSettings())
    echoed(connections.get(url, "/close"))
    assert echoed(connections.get(url, "/state/c/k"))["path"] == "/state/c/k"
    assert len(accepted) == 2
    connections.close()


def test_at_most_idle_connections_are_kept_per_origin(origin):
    url, _ = origin
    connections = Connections(ServeSettings(), idle=1)
    first, _ = connections._take(url)
    second, _ = connections._take(url)
    connections._give(url, first)
    connections._give(url, second)
    assert connections._free[url] == [first]
    connections.close()
    assert connections._free == {}


def test_an_endpoint_that_cannot_be_reached_is_a_peer_unreachable():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(PeerUnreachable, match=rf"^http://127.0.0.1:{port}: "):
        Connections(ServeSettings(), timeout_s=2).get(f"http://127.0.0.1:{port}", "/state/c/k")
