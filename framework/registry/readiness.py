"""When the embedded registry is ready: its Confluent-compatible API answers.

The HTTP port opens before the application has set up its storage; a registry is ready for
clients once `GET /subjects` on the compatible API returns its list of subjects.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

ACCEPT = "application/vnd.schemaregistry.v1+json"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""An opener that ignores any http_proxy of the environment: the registry is on 127.0.0.1."""


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether the Confluent-compatible API at `url` lists its subjects."""
    request = urllib.request.Request(f"{url}/subjects", headers={"Accept": ACCEPT})
    try:
        with DIRECT.open(request, timeout=timeout) as response:
            return response.status == 200 and isinstance(json.load(response), list)
    except (urllib.error.URLError, OSError, ValueError):
        return False
