"""The query endpoint answered from this process's replicas, without a broker: the answer's
shape, windows' open state, a token, and what it refuses (an unknown computation, a bad bound,
a forwarded query it cannot answer itself: 503 with Retry-After, never a second hop)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from framework import Computation, Pipeline, key_by, windows
from framework.errors import ConfigurationError
from framework.query.connections import HOP_HEADER, Connections, PeerUnreachable
from framework.query.placement import partition_of
from framework.query.replicas import Replicas
from framework.query.server import QueryServer, state_path
from framework.query.settings import ServeSettings
from framework.serde.json_codec import encode_json
from framework.testing import Harness
from tests.unit.query.test_replicas import Store

TOKEN = "0123456789abcdef-token"


class Count(Computation):
    def process_record(self, ctx, record):
        ctx.state["n"] = ctx.state.get("n", 0) + 1


def shop() -> Pipeline:
    pipeline = Pipeline("shop")
    pipeline.source("clicks")
    pipeline.computation("count", Count, inputs={"clicks": key_by("user")})
    pipeline.windowed(
        "per-minute", inputs={"clicks": key_by("user")},
        window=windows.Tumbling(size_ms=60_000), aggregate=windows.Count(), output="counts",
    )  # fmt: skip
    return pipeline


def get(url: str, path: str, headers: dict | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


@pytest.fixture
def served():
    pipeline, replicas = shop(), Replicas()
    server = QueryServer(pipeline, "per-minute", replicas, bootstrap="127.0.0.1:1")
    server.instance = "pod-0"
    try:
        yield pipeline, replicas, server
    finally:
        server.close()


def test_a_windowed_computation_answers_its_open_windows_oldest_first(served):
    pipeline, replicas, server = served
    harness = Harness(pipeline, "per-minute")
    for ts in (125_000, 61_000, 62_000):
        harness.send("clicks", "k", {"user": "a/b c"}, ts)
    partition = partition_of("a/b c", pipeline["per-minute"].partitions)
    replicas.activate(partition, Store({"a/b c": encode_json(harness.state("a/b c"))}))
    status, _, answer = get(server.url, state_path("per-minute", "a/b c", None))
    assert (status, answer) == (200, {
        "key": "a/b c", "partition": partition, "instance": "pod-0", "served_by": "active",
        "lag": 0, "value": [
            {"start": 60_000, "end": 120_000, "value": 2},
            {"start": 120_000, "end": 180_000, "value": 1},
        ],
    })  # fmt: skip


def test_what_it_refuses(served):
    _, _, server = served
    status, _, answer = get(server.url, "/state/no-such/k")
    assert status == 404 and "'count', 'per-minute'" in answer["error"]
    assert get(server.url, "/state/count/k?max_lag=-1")[0] == 400
    assert get(server.url, "/metrics")[0] == 404
    status, headers, _ = get(server.url, "/state/per-minute/k", {HOP_HEADER: "1"})
    assert status == 503 and headers["Retry-After"] == "1"  # a hop is never forwarded again


def test_with_a_token_a_request_without_it_is_refused():
    pipeline, replicas = shop(), Replicas()
    replicas.activate(partition_of("k", 4), Store({"k": b"{}"}))
    server = QueryServer(
        pipeline, "count", replicas, bootstrap="127.0.0.1:1", settings=ServeSettings(token=TOKEN)
    )
    try:
        assert get(server.url, "/state/count/k")[0] == 401
        assert get(server.url, "/state/count/k", {"Authorization": "Bearer nope"})[0] == 401
        status, _, answer = get(server.url, "/state/count/k", {"Authorization": f"Bearer {TOKEN}"})
        assert (status, answer["value"]) == (200, {})
    finally:
        server.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a certificate")
def test_with_tls_it_answers_a_client_that_trusts_its_certificate_and_only_over_tls(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    pipeline, replicas = shop(), Replicas()
    replicas.activate(partition_of("k", 4), Store({"k": b'{"n": 1}'}))
    settings = ServeSettings(certfile=str(cert), keyfile=str(key), cafile=str(cert), token=TOKEN)
    server = QueryServer(pipeline, "count", replicas, bootstrap="127.0.0.1:1", settings=settings)
    silent = socket.create_connection(("127.0.0.1", server.port))  # never says hello
    try:
        assert server.url.startswith("https://127.0.0.1:")
        reply = Connections(settings).get(server.url, "/state/count/k")
        assert (reply.status, json.loads(reply.body)["value"]) == (200, {"n": 1})
        with pytest.raises(PeerUnreachable):  # a client that does not trust it
            Connections(ServeSettings(token=TOKEN)).get(server.url, "/state/count/k")
        with pytest.raises(PeerUnreachable):  # plain HTTP
            Connections(settings).get(server.url.replace("https", "http"), "/state/count/k")
    finally:
        silent.close()
        server.close()


def test_a_port_taken_fails_at_start_in_one_line_naming_the_fix(served):
    pipeline, replicas, server = served
    with pytest.raises(ConfigurationError, match="choose another port"):
        QueryServer(pipeline, "count", replicas, bootstrap="127.0.0.1:1", port=server.port)
