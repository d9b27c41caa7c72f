"""How the query endpoint is served: `--serve [HOST:]PORT` and the `[serve]` table of
`--config` (TLS and a bearer token), checked at start with messages that name the fix.

The endpoint binds 127.0.0.1 unless a host is given, as the metrics endpoint does: state is
the job's data. Off loopback, give it TLS (`certfile`, `keyfile`) and a `token`: every
instance forwards queries to the others with it, and clients send it as
`Authorization: Bearer <token>`. Values may name environment variables as `${VAR}`.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework.errors import ConfigurationError
from framework.kafka.config import expand_env

DEFAULT_HOST = "127.0.0.1"
KEYS = ("certfile", "keyfile", "cafile", "token", "advertise")


@dataclass(frozen=True)
class ServeSettings:
    """The `[serve]` table: `certfile`/`keyfile` (PEM) serve HTTPS; `cafile` is what clients
    and forwarding instances trust (default: the system's CAs); `token` is the bearer token
    every request must carry; `advertise` is the `HOST[:PORT]` other instances and clients
    reach this one at (default: the bound host, or this machine's name when bound to every
    interface)."""

    certfile: str | None = None
    keyfile: str | None = None
    cafile: str | None = None
    token: str | None = None
    advertise: str | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.certfile else "http"

    def server_context(self) -> ssl.SSLContext | None:
        if not self.certfile:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.certfile, self.keyfile)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.cafile)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def serve_settings(table: Mapping[str, Any], origin: str) -> ServeSettings:
    """The `[serve]` table, checked: unknown keys, a key without its certificate, a file that
    cannot be read, or an empty token fail in one line naming the fix."""
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigurationError(f"{origin}: unknown setting(s) {unknown}; known: {list(KEYS)}")
    values = expand_env(table, origin)
    for key, value in values.items():
        if not isinstance(value, str):
            raise ConfigurationError(f"{origin}: {key} must be a string")
    settings = ServeSettings(**values)
    if bool(settings.certfile) != bool(settings.keyfile):
        raise ConfigurationError(f"{origin}: give certfile and keyfile together (PEM files)")
    for key in ("certfile", "keyfile", "cafile"):
        path = getattr(settings, key)
        if path and not os.access(path, os.R_OK):
            raise ConfigurationError(f"{origin}: {key} {path!r} cannot be read: fix the path")
    if settings.token is not None and len(settings.token) < 16:
        raise ConfigurationError(f"{origin}: token is too short: give 16 characters or more")
    return settings


def parse_serve(value: str) -> tuple[str, int]:
    """`[HOST:]PORT` (`[::1]:8080` for IPv6) as (host, port); HOST defaults to 127.0.0.1."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, value
    host = host.strip("[]") or DEFAULT_HOST
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise ConfigurationError(
            f"--serve {value!r}: give [HOST:]PORT, e.g. 8080 or 0.0.0.0:8080 (0: a free port)"
        )
    return host, number


def advertised(settings: ServeSettings, host: str, port: int) -> str:
    """The URL other instances and clients reach this endpoint at."""
    if settings.advertise:
        name, sep, given = settings.advertise.rpartition(":")
        if sep and given.isdigit():
            host, port = name, int(given)
        else:
            host = settings.advertise
    elif _every_interface(host):
        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"{settings.scheme}://{host}:{port}"


def _every_interface(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False
