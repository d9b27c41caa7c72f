"""`logwheel ui`'s web server: the page (three static files shipped with the package) and
`/api/pipeline`, on 127.0.0.1, read-only.

The standard library's `ThreadingHTTPServer` serves it: four GET routes on the loopback
interface need nothing a framework adds, and the wheel keeps no web dependency. One thread
gathers the figures every `REFRESH_MS` (framework/ops/dashboard.py); requests read the last
answer, so any number of open pages costs the cluster one look per refresh."""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from framework.core.clock import now_ms
from framework.core.pipeline import Pipeline
from framework.errors import ConfigurationError
from framework.ops.dashboard import REFRESH_MS, Facts, assemble, gather

log = logging.getLogger(__name__)

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}
HOST = "127.0.0.1"


def static_file(name: str) -> bytes:
    """A file of the page, from the package (framework/ops/static/)."""
    return (resources.files("framework.ops") / "static" / name).read_bytes()


class Figures:
    """The latest `/api/pipeline` answer, renewed by a thread of its own."""

    def __init__(
        self,
        pipeline: Pipeline,
        ref: str,
        look: Callable[[], Facts],
        replay_options: str = "",
        every_ms: int = REFRESH_MS,
    ) -> None:
        self.pipeline, self.ref, self.look = pipeline, ref, look
        self.replay_options, self.every_s = replay_options, every_ms / 1000
        self._answer: bytes | None = None
        self._facts: Facts | None = None
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-figures", daemon=True)

    def start(self) -> Figures:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)  # a look under way ends with the process

    def refresh(self) -> None:
        """Look at the cluster once; a failed look keeps the last figures and says why."""
        try:
            facts = self.look()
            answer = assemble(self.pipeline, self.ref, facts, self._facts, self.replay_options)
            self._facts = facts
        except Exception as error:  # the page says so and keeps the last figures
            log.warning("dashboard: could not gather the figures: %s", error)
            if self._answer is None:  # the graph at least: it comes from the declarations
                empty = Facts(now_ms(), [])
                answer = assemble(self.pipeline, self.ref, empty, None, self.replay_options)
            else:
                answer = json.loads(self._answer)
            answer["error"] = str(error)
        with self._ready:
            self._answer = json.dumps(answer).encode()
            self._ready.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.every_s)

    def answer(self, timeout: float = 60) -> bytes | None:
        """The latest answer, waiting for the first one."""
        with self._ready:
            self._ready.wait_for(lambda: self._answer is not None, timeout)
            return self._answer


def make_server(figures: Figures, port: int) -> ThreadingHTTPServer:
    """The page's server on 127.0.0.1:`port` (0: a free one), not yet serving."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path == "/api/pipeline":
                body = figures.answer()
                if body is None:
                    self._send(
                        HTTPStatus.SERVICE_UNAVAILABLE, b'{"error": "not yet"}', "application/json"
                    )
                else:
                    self._send(HTTPStatus.OK, body, "application/json")
            elif path in STATIC:
                name, kind = STATIC[path]
                self._send(HTTPStatus.OK, static_file(name), kind)
            else:
                self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

        def _send(self, code: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            log.debug("%s " + format, self.address_string(), *args)

    try:
        server = ThreadingHTTPServer((HOST, port), Handler)
    except OSError as error:
        raise ConfigurationError(
            f"cannot serve on {HOST}:{port} ({error.strerror}): give another port with --port N "
            "(0: a free one)"
        ) from None
    server.daemon_threads = True
    return server


def serve(
    pipeline: Pipeline,
    ref: str,
    bootstrap: str,
    kafka: dict | None,
    port: int,
    replay_options: str = "",
    say: Callable[[str], None] = print,
) -> None:
    """Serve the dashboard until SIGTERM (or Ctrl-C); from the main thread."""
    figures = Figures(
        pipeline, ref, lambda: gather(pipeline, bootstrap, kafka), replay_options
    ).start()
    server = make_server(figures, port)

    def stop(signum: int, frame: object) -> None:  # from the serving thread: shut down in another
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        say(f"http://{HOST}:{server.server_address[1]}/")
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        figures.stop()
