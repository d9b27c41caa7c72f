"""`StateClient`: a key's committed state from outside the job, with nothing but the bootstrap
servers — the owning instance is found through the computation's group
(framework/query/routing.py) and asked directly, without a hop through another instance.

    client = StateClient("clicks", bootstrap="127.0.0.1:9092")
    client.get("per-user", "ann")               # the state document, None when it has none
    client.query("per-user", "ann", max_lag=100)   # the whole answer, a standby allowed

While no instance can answer (a rebalance, a restore, an owner just killed) it asks again,
the routes looked up afresh, until `deadline_s` has passed, then raises `StateUnavailable`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framework.core.pipeline import Pipeline
from framework.errors import ConfigurationError, LogwheelError, Retry
from framework.query.connections import HOP_HEADER, Connections, PeerUnreachable
from framework.query.routing import Router
from framework.query.server import state_path
from framework.query.settings import ServeSettings, serve_settings

DEADLINE_S = 30.0
BACKOFF_S = (0.05, 1.0)


class StateUnavailable(Retry):
    """No instance answered for the key within the deadline."""


class StateClient:
    """Queries of a pipeline's state; `pipeline` is a `Pipeline` or its name. `config` is a
    `--config` TOML file (its `[kafka]` and `[serve]` tables) or a mapping of those tables."""

    def __init__(
        self,
        pipeline: Pipeline | str,
        *,
        bootstrap: str | None = None,
        config: str | os.PathLike | Mapping[str, Mapping[str, Any]] | None = None,
        deadline_s: float = DEADLINE_S,
    ) -> None:
        from framework.broker.bootstrap import bootstrap_from

        self.pipeline = pipeline if isinstance(pipeline, Pipeline) else None
        name = pipeline.name if isinstance(pipeline, Pipeline) else pipeline
        kafka, serve = _tables(config)
        self.router = Router(name, bootstrap_from(bootstrap), kafka)
        self.connections = Connections(serve)
        self.deadline_s = deadline_s

    def get(self, computation: str, key: str, max_lag: int | None = None) -> Any:
        """The key's committed state (None when it has none)."""
        return self.query(computation, key, max_lag)["value"]

    def query(self, computation: str, key: str, max_lag: int | None = None) -> dict[str, Any]:
        """The whole answer: `{"key", "value", "partition", "instance", "served_by", "lag"}`.
        With `max_lag`, a standby at most that many changelog records behind may answer
        when the owner cannot."""
        if self.pipeline is not None:
            self.pipeline[computation]  # noqa: B018 - fails naming the computations there are
        deadline = time.monotonic() + self.deadline_s
        wait, why = BACKOFF_S[0], ""
        path = state_path(computation, key, max_lag)
        while True:
            try:
                placement = self.router.place(computation, key)
            except LogwheelError as error:  # the cluster out of reach: asked again
                placement, why = None, str(error)
            for replica in placement.replicas if placement else ():
                if not replica.active and max_lag is None:
                    continue
                try:
                    reply = self.connections.get(replica.url, path, {HOP_HEADER: "1"})
                except PeerUnreachable as error:
                    why = f"{replica.instance} at {replica.url}: {error}"
                    continue
                if reply.status == 200:
                    return json.loads(reply.body)
                if reply.status in (401, 404, 400):
                    raise ConfigurationError(f"{replica.url}{path}: {_error(reply.body)}")
                why = f"{replica.instance}: {reply.status} {_error(reply.body)}"
            if placement is not None and not placement.replicas:
                why = f"no instance holds partition {placement.partition} now (rebalancing?)"
            elif (
                placement is not None
                and max_lag is None
                and not any(replica.active for replica in placement.replicas)
            ):
                why = (
                    f"no instance owns partition {placement.partition} now (rebalancing?); "
                    "its standbys answer only with max_lag"
                )
            self.router.forget(computation)
            if time.monotonic() + wait > deadline:
                raise StateUnavailable(
                    f"no answer for {key!r} of {computation} in {self.deadline_s:g} s: {why}"
                )
            time.sleep(wait)
            wait = min(BACKOFF_S[1], wait * 2)

    def close(self) -> None:
        self.connections.close()

    def __enter__(self) -> StateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tables(
    config: str | os.PathLike | Mapping[str, Mapping[str, Any]] | None,
) -> tuple[dict[str, Any], ServeSettings]:
    from framework.kafka.config import expand_env

    if config is None:
        return {}, ServeSettings()
    if isinstance(config, Mapping):
        kafka = expand_env(dict(config.get("kafka", {})), "config [kafka]")
        return kafka, serve_settings(dict(config.get("serve", {})), "config [serve]")
    path = str(Path(config))
    return _file_tables(path)


def _file_tables(path: str) -> tuple[dict[str, Any], ServeSettings]:
    import tomllib

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigurationError(f"--config {path}: {error}") from None
    from framework.kafka.config import expand_env

    kafka = expand_env(doc.get("kafka", {}), f"--config {path} [kafka]")
    return kafka, serve_settings(doc.get("serve", {}), f"--config {path} [serve]")


def _error(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        return body[:200].decode(errors="replace")
