"""An impostor: a program that is not logwheel's, listening on 127.0.0.1 at a port one of
logwheel's services (the broker, the registry) saved as its own, and answering as a registry
does (`GET /subjects` -> `[]`), so that a check looking only at the answer is fooled.

`impostor(port)` runs one for a test (as another user with `user=65534`, which needs root;
with a service's marks on its command line if asked);
`python tests/support_impostor.py PORT` is the program itself, which a stand-in JVM may start
to play the program that takes the port while the service starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

LIVENESS_S = 30.0
"""A bound on the impostor's start on a loaded machine; never a measure of speed."""


class Subjects(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server interface
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, *args) -> None:
        pass


def spawn(port: int, *arguments: str, user: int | None = None) -> subprocess.Popen:
    """Start the impostor on `port` in a session of its own (as `user`, if given; `arguments`
    on its command line, which it ignores) and return once it listens."""
    from framework.jvm.process import listeners

    python, ids = sys.executable, {}
    if user is not None:  # a Python it may run (ours may lie under a private home)
        python = shutil.which("python3", path="/usr/bin:/usr/local/bin") or python
        ids = {"user": user, "group": user, "extra_groups": []}
    # its source on the command line: another user may not read this checkout (a clone
    # under a 0700 directory, as mktemp -d makes)
    child = subprocess.Popen(
        [python, "-c", Path(__file__).read_text(), str(port), *arguments],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        **ids,
    )
    deadline = time.monotonic() + LIVENESS_S
    while not listeners(port) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert listeners(port), f"the impostor did not listen on {port} (exit {child.poll()})"
    return child


@contextlib.contextmanager
def impostor(port: int, *arguments: str, user: int | None = None) -> Iterator[int]:
    """An impostor listening on 127.0.0.1:`port` for the block; its pid."""
    child = spawn(port, *arguments, user=user)
    try:
        yield child.pid
    finally:
        end(child.pid)
        child.wait(LIVENESS_S)


def end(pid: int) -> None:
    """SIGKILL the impostor `pid` with its session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Subjects).serve_forever()
