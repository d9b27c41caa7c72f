"""HTTP/1.1 connections to query endpoints, kept alive and reused (a query is a millisecond's
work: a TCP or TLS handshake per query would cost more than the answer), with the `[serve]`
settings' trust and bearer token. Used by the server to forward and by `StateClient`."""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from framework.errors import Retry
from framework.query.settings import ServeSettings

HOP_HEADER = "X-Logwheel-Hop"
"""Set on a query one instance forwards to another (and on a `StateClient`'s, which already
went to the right one): it is answered from the receiver's own replicas, never forwarded."""


class PeerUnreachable(Retry):
    """A query endpoint that could not be reached or broke off its answer."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes


class Connections:
    """Idle keep-alive connections by origin; safe across threads."""

    def __init__(self, settings: ServeSettings, timeout_s: float = 5.0, idle: int = 8) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.idle = idle
        self._lock = threading.Lock()
        self._free: dict[str, list[http.client.HTTPConnection]] = {}
        self._context = settings.client_context()

    def get(self, origin: str, path: str, headers: Mapping[str, str] | None = None) -> Reply:
        """GET `path` at `origin` (`http(s)://host:port`); `PeerUnreachable` when it cannot
        be reached. A kept connection the other side has closed meanwhile is replaced once."""
        sent = {**self.settings.headers(), **(headers or {})}
        conn, reused = self._take(origin)
        while True:
            try:
                conn.request("GET", path, headers=sent)
                response = conn.getresponse()
                body = response.read()
                break
            except (OSError, http.client.HTTPException) as error:
                conn.close()
                if not reused:
                    raise PeerUnreachable(f"{origin}: {error}") from None
                conn, reused = self._fresh(origin), False
        reply = Reply(response.status, dict(response.getheaders()), body)
        if response.will_close:
            conn.close()
        else:
            self._give(origin, conn)
        return reply

    def _take(self, origin: str) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            free = self._free.get(origin)
            if free:
                return free.pop(), True
        return self._fresh(origin), False

    def _fresh(self, origin: str) -> http.client.HTTPConnection:
        url = urllib.parse.urlsplit(origin)
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(
                url.hostname, url.port, timeout=self.timeout_s, context=self._context
            )
        else:
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=self.timeout_s)
        return conn

    def _give(self, origin: str, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            free = self._free.setdefault(origin, [])
            if len(free) < self.idle:
                free.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            conns = [c for free in self._free.values() for c in free]
            self._free.clear()
        for conn in conns:
            conn.close()
