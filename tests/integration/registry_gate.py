"""A stand-in for a Schema Registry's access control (tests only): a tiny HTTP server in a
thread that passes every request through to a real registry, except that it answers 403 for
the ids it denies (as Confluent's RBAC does for a subject the principal may not read, with
Confluent's JSON error body) and 429 for the first requests of the ids it throttles.

The embedded registry (Apicurio) has no per-subject access rules; this gate stands in for
them, not for the registry: every schema, id and compatibility check is the real registry's.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Gate:
    """What the gate answers for which ids; `asked` counts the requests per id."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.denied: dict[int, str] = {}  # id -> the subject the 403 names
        self.throttled: dict[int, int] = {}  # id -> how many 429s are left to answer
        self.asked: dict[int, int] = {}
        self.url = ""

    def answer(self, method: str, path: str, body: bytes | None, headers: dict) -> tuple:
        """(status, body) for one request: the gate's own, else the registry's."""
        if method == "GET" and path.startswith("/schemas/ids/"):
            schema_id = int(path.split("?")[0].split("/")[3])
            self.asked[schema_id] = self.asked.get(schema_id, 0) + 1
            if schema_id in self.denied:
                return 403, {
                    "error_code": 40301,
                    "message": f"User is denied operation Read on Subject: "
                    f"{self.denied[schema_id]}",
                }
            if self.throttled.get(schema_id):
                self.throttled[schema_id] -= 1
                return 429, {"error_code": 42901, "message": "Too many requests"}
        request = urllib.request.Request(
            self.upstream + path, data=body, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read()


@contextmanager
def registry_gate(upstream: str) -> Iterator[Gate]:
    """A `Gate` in front of the registry at `upstream`, serving on 127.0.0.1 (its `url`)."""
    gate = Gate(upstream)

    class Handler(BaseHTTPRequestHandler):
        def _pass(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {"Content-Type": self.headers.get("Content-Type") or "application/json"}
            status, out = gate.answer(self.command, self.path, body, headers)
            if isinstance(out, dict):
                out = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PUT = do_DELETE = _pass  # noqa: N815 - http.server's names

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    gate.url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield gate
    finally:
        server.shutdown()
        server.server_close()
