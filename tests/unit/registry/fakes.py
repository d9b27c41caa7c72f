"""A stand-in for the registry's JVM in unit tests of its lifecycle: started as `java` with
the registry's command line, it serves `GET /subjects` on the port that line names, as the
Confluent-compatible API does. `FAKE_REGISTRY_EXIT` makes it log an error and exit instead;
`FAKE_REGISTRY_IMPOSTOR` makes it start another program on that port (tests/support_impostor.py,
its pid in `impostor.pid` in the home) and never listen itself, as when another program takes
the port while the JVM starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


class Subjects(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server interface
        body = json.dumps([] if self.path == "/subjects" else {"error": 404}).encode()
        self.send_response(200 if self.path == "/subjects" else 404)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    if os.environ.get("FAKE_REGISTRY_EXIT"):
        print("INFO starting", flush=True)
        print(f"ERROR {os.environ['FAKE_REGISTRY_EXIT']}", flush=True)
        sys.exit(1)
    port = next(int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("-Dquarkus.http.port="))
    if os.environ.get("FAKE_REGISTRY_IMPOSTOR"):
        impostor = os.path.join(os.path.dirname(__file__), "..", "..", "support_impostor.py")
        child = subprocess.Popen([sys.executable, impostor, str(port)], start_new_session=True)
        with open("impostor.pid", "w") as out:
            out.write(f"{child.pid}\n")
        time.sleep(600)
    HTTPServer(("127.0.0.1", port), Subjects).serve_forever()


if __name__ == "__main__":
    main()
