"""Toxiproxy (github.com/Shopify/toxiproxy/v2), a real TCP fault proxy, for network faults
between clients and brokers: latency, bandwidth limits, resets, a broker cut off.

`toxiproxy_server()` builds the server once with Go into `LOGWHEEL_HOME` (default
~/.cache/logwheel)/toxiproxy/VERSION/ (the Go module proxy must answer the first time), runs
it on a free loopback port and stops it at the end; its HTTP API is driven with urllib.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from framework.jvm.process import accepts, any_free_port, wait_exit

VERSION = "v2.5.0"
MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"


def toxiproxy_binary() -> Path:
    """The toxiproxy server binary, built with `go install` on first use (builds of
    concurrent test workers wait for each other)."""
    cache = Path(os.environ.get("LOGWHEEL_HOME") or Path.home() / ".cache" / "logwheel")
    folder = cache / "toxiproxy" / VERSION
    binary = folder / "server"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            go = shutil.which("go")
            if go is None:
                raise RuntimeError("Toxiproxy is built with Go: install Go 1.19+ (go on PATH)")
            env = {**os.environ, "GOBIN": str(folder)}
            subprocess.run([go, "install", f"{MODULE}@{VERSION}"], env=env, check=True)
    return binary


class Toxiproxy:
    """A running toxiproxy server's HTTP API."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def _call(self, method: str, path: str, body: dict | None = None) -> dict | None:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
        return json.loads(text) if text else None

    def create(self, name: str, listen: int, upstream: int) -> None:
        """A proxy from 127.0.0.1:`listen` to 127.0.0.1:`upstream`."""
        body = {"name": name, "listen": f"127.0.0.1:{listen}"}
        self._call("POST", "/proxies", {**body, "upstream": f"127.0.0.1:{upstream}"})

    def cut(self, name: str) -> None:
        """Cut the proxy: its connections are closed and new ones refused."""
        self._call("POST", f"/proxies/{name}", {"enabled": False})

    def restore(self, name: str) -> None:
        self._call("POST", f"/proxies/{name}", {"enabled": True})

    def add_toxic(
        self, proxy: str, kind: str, stream: str = "downstream", **attributes: int
    ) -> str:
        """Add a toxic (latency=MS jitter=MS, bandwidth rate=KB/s, reset_peer timeout=MS,
        timeout timeout=MS, ...) to one direction of `proxy`; its name, for `remove_toxic`."""
        name = f"{kind}_{stream}"
        body = {"name": name, "type": kind, "stream": stream, "attributes": attributes}
        self._call("POST", f"/proxies/{proxy}/toxics", body)
        return name

    def remove_toxic(self, proxy: str, toxic: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}")

    def reset(self) -> None:
        """Every proxy enabled again, every toxic removed."""
        self._call("POST", "/reset")

    def schedule(self, steps: list[tuple[float, Callable[[], None]]]) -> threading.Thread:
        """Run each `(seconds from now, action)` at its time, in a daemon thread (started)."""
        began = time.monotonic()

        def run() -> None:
            for at, action in sorted(steps, key=lambda step: step[0]):
                time.sleep(max(0.0, began + at - time.monotonic()))
                action()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread


@contextmanager
def toxiproxy_server(log: Path) -> Iterator[Toxiproxy]:
    """A toxiproxy server on a free loopback port, its output in `log`; stopped at the end."""
    port = any_free_port()
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(toxiproxy_binary()), "-host", "127.0.0.1", "-port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 30
        while not accepts(port):
            assert process.poll() is None, f"toxiproxy exited; see {log}"
            assert time.monotonic() < deadline, f"toxiproxy did not answer; see {log}"
            time.sleep(0.1)
        yield Toxiproxy(port)
    finally:
        process.terminate()
        if not wait_exit(process.pid, 10):
            process.kill()
        process.wait(10)
