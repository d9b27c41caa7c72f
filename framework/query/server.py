"""The query endpoint of one `logwheel run` process (`--serve [HOST:]PORT`):
`GET /state/<computation>/<key>[?max_lag=N]` answers

    {"key", "value", "partition", "instance", "served_by": "active"|"standby", "lag"}

from committed state only. The process answers from its own replica when it owns the key's
partition (lag 0), or, with `max_lag`, holds a standby replica at most N changelog offsets
behind the changelog's last stable offset; else it asks the instance that does
(framework/query/routing.py) — once: a forwarded query carries `X-Logwheel-Hop` and is
answered from the receiver's replicas or refused. While no instance can answer (a rebalance,
a restore, an owner just killed), 503 with `Retry-After`. 404 names a computation the
pipeline does not have; 401 a request without the `[serve]` token.

Served by the standard library's `http.server` on threads of its own, beside the membership's
loop: a query reads RocksDB (framework/query/replicas.py) and never waits for the loop.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import ssl
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from confluent_kafka.admin import AdminClient

from framework.core.pipeline import ComputationSpec, Pipeline
from framework.errors import ConfigurationError, LogwheelError, Retry
from framework.kafka.config import client_config
from framework.kafka.topic_ends import end_offsets
from framework.query.connections import HOP_HEADER, Connections, PeerUnreachable
from framework.query.directory import Address, publish
from framework.query.placement import partition_of
from framework.query.replicas import Replicas
from framework.query.routing import NotServed, Router
from framework.query.settings import ServeSettings, advertised
from framework.serde.catalogue import decoder_for

log = logging.getLogger(__name__)
RETRY_AFTER_S = 1
IDLE_S = 30.0
"""How long a connection may sit idle (or take to finish its TLS handshake) before it is
closed: each holds a thread."""
LAG_TIMEOUT_S = 5.0


class Unavailable(Retry):
    """No replica that may answer could be reached: a 503."""


class QueryServer:
    """Serves the state of `computation`'s replicas in this process, and routes queries for
    any computation of `pipeline` to the instance that holds the key."""

    def __init__(
        self,
        pipeline: Pipeline,
        computation: str,
        replicas: Replicas,
        *,
        bootstrap: str,
        kafka: dict | None = None,
        settings: ServeSettings | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.pipeline = pipeline
        self.spec: ComputationSpec = pipeline[computation]
        self.replicas = replicas
        self.bootstrap = bootstrap
        self.kafka = dict(kafka or {})
        self.settings = settings or ServeSettings()
        self.router = Router(pipeline.name, bootstrap, self.kafka)
        self.connections = Connections(self.settings)
        self.instance = ""  # known once the runner has its instance id (`publish`)
        self._admin: AdminClient | None = None  # made at the first standby read
        self._decode = decoder_for(self.spec.state_schema)
        self._view = self.spec.factory().queried_state
        try:
            self._http = _Server((host, port), _Handler)
        except OSError as error:
            raise ConfigurationError(
                f"--serve {host}:{port}: cannot listen there ({error.strerror or error}): "
                "choose another port (0: a free one) or address"
            ) from None
        self._http.app = self
        self._http.context = self.settings.server_context()
        self.port = self._http.server_address[1]
        self.url = advertised(self.settings, host, self.port)
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.1,), name="query-server", daemon=True
        )
        self._thread.start()
        log.info("%s: serving state on %s (bound to %s)", self.spec.group, self.url, host)

    def publish(self, instance: str, standby: int) -> None:
        """Tell the group where this instance answers (framework/query/directory.py)."""
        self.instance = instance
        address = Address(
            instance, self.url, standby, self.spec.keyed_topics[0], self.spec.partitions
        )
        publish(self.bootstrap, self.kafka, self.spec.group, address)

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self.connections.close()

    # -- answering ----------------------------------------------------------------------------

    def answer(
        self, computation: str, key: str, max_lag: int | None, hop: bool
    ) -> tuple[int, dict[str, Any]]:
        """(status, body) of a query."""
        queryable = [p.name for p in self.pipeline.parts() if p.queryable]
        if computation not in queryable:
            return 404, {
                "error": f"pipeline {self.pipeline.name!r} has no computation {computation!r} "
                f"whose state may be queried; it has {sorted(queryable)}"
            }
        if computation == self.spec.name:
            local = self._local(key, max_lag)
            if local is not None:
                return 200, local
        if hop:
            return 503, {"error": f"{self.instance or 'this instance'} holds no replica of "
                         f"{key!r} that may answer"}  # fmt: skip
        try:
            return 200, self._forwarded(computation, key, max_lag)
        except (NotServed, Unavailable, LogwheelError) as error:
            return 503, {"error": str(error)}

    def _local(self, key: str, max_lag: int | None) -> dict[str, Any] | None:
        """The answer of this process's replica of the key, if it may give one."""
        partition = partition_of(key, self.spec.partitions)
        read = self.replicas.read(partition, key)
        if read is None:
            return None
        if read.active:
            lag = 0
        else:
            if max_lag is None:
                return None
            if self._admin is None:
                self._admin = AdminClient(client_config(self.bootstrap, self.kafka))
            ends = end_offsets(
                self._admin, [(self.spec.changelog, partition)], committed=True,
                timeout=LAG_TIMEOUT_S,
            )  # fmt: skip
            lag = max(0, ends[(self.spec.changelog, partition)] - read.applied)
            if lag > max_lag:
                return None
        value = None if read.raw is None else self._view(self._decode(read.raw))
        return {
            "key": key,
            "value": value,
            "partition": partition,
            "instance": self.instance,
            "served_by": "active" if read.active else "standby",
            "lag": lag,
        }

    def _forwarded(self, computation: str, key: str, max_lag: int | None) -> dict[str, Any]:
        """The answer of the instance holding the key: its owner, else (with `max_lag`) one
        of its standbys; `Unavailable` when none answers."""
        placement = self.router.place(computation, key)
        candidates = [r for r in placement.replicas if r.active or max_lag is not None]
        path = state_path(computation, key, max_lag)
        tried = []
        for replica in candidates:
            if replica.instance == self.instance and computation == self.spec.name:
                continue  # this process: already asked
            try:
                reply = self.connections.get(replica.url, path, {HOP_HEADER: "1"})
            except PeerUnreachable as error:
                tried.append(f"{replica.instance}: {error}")
                continue
            if reply.status == 200:
                return json.loads(reply.body)
            tried.append(f"{replica.instance}: {reply.status}")
        self.router.forget(computation)
        where = "; ".join(tried) or "no instance holds it now (the group is rebalancing?)"
        raise Unavailable(f"partition {placement.partition} of {computation}: {where}")


def state_path(computation: str, key: str, max_lag: int | None) -> str:
    """The request path of a query."""
    path = f"/state/{urllib.parse.quote(computation, safe='')}/{urllib.parse.quote(key, safe='')}"
    return path if max_lag is None else f"{path}?max_lag={max_lag}"


def _json(value: Any) -> bytes:
    return json.dumps(value, default=_jsonable, ensure_ascii=False).encode()


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):  # an Avro state's bytes field
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    app: QueryServer
    context: ssl.SSLContext | None = None

    def finish_request(self, request, client_address) -> None:
        """Each connection's TLS handshake in its own thread, bounded: wrapping the listening
        socket instead handshakes in the accepting thread, where one client that never
        sends its hello (or speaks plain HTTP) holds every other one off."""
        if self.context is None:
            return super().finish_request(request, client_address)
        request.settimeout(IDLE_S)
        try:
            secured = self.context.wrap_socket(request, server_side=True)
        except OSError:
            return None
        try:
            return super().finish_request(secured, client_address)
        finally:
            secured.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse their connection
    # headers and body go out in two writes: with Nagle's algorithm the body waited for the
    # client's delayed ACK, 40 ms a query (bench/query.py)
    disable_nagle_algorithm = True
    timeout = IDLE_S  # an idle kept-alive connection ends, its thread with it
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        app = self.server.app
        token = app.settings.token
        if token and not hmac.compare_digest(
            self.headers.get("Authorization", "").encode(), f"Bearer {token}".encode()
        ):
            self._send(401, {"error": "give the [serve] token as Authorization: Bearer <token>"})
            return
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.split("/", 3)
        if len(parts) != 4 or parts[0] or parts[1] != "state" or not parts[2]:
            self._send(404, {"error": "GET /state/<computation>/<key>[?max_lag=N]"})
            return
        computation, key = urllib.parse.unquote(parts[2]), urllib.parse.unquote(parts[3])
        query = urllib.parse.parse_qs(url.query)
        max_lag = None
        if "max_lag" in query:
            given = query["max_lag"][-1]
            if not given.isdigit():
                self._send(400, {"error": "max_lag: give a number of changelog records >= 0"})
                return
            max_lag = int(given)
        try:
            status, body = app.answer(computation, key, max_lag, bool(self.headers.get(HOP_HEADER)))
        except Exception as error:  # noqa: BLE001 - a query never ends the server
            log.warning("%s: answering %s: %s", app.spec.group, self.path, error)
            status, body = 503, {"error": f"{type(error).__name__}: {error}"}
        self._send(status, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = _json(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == HTTPStatus.SERVICE_UNAVAILABLE:
            self.send_header("Retry-After", str(RETRY_AFTER_S))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        log.debug("%s %s", self.address_string(), format % args)
