"""Which Schema Registry a pipeline runs against, how its client connects, and under which
subjects writers register their schemas — from `Pipeline(name, registry=URL,
subject_strategy=...)`, the `[registry]` table of `--config FILE.toml` and
`LOGWHEEL_SCHEMA_REGISTRY`, resolved once at start.

The URL: the pipeline's own (the job's code says where its schemas live) wins over
`[registry] url` (the deployment's file), which wins over `$LOGWHEEL_SCHEMA_REGISTRY` (the
process's environment) — as for Kafka, where the explicit setting beats the environment.
The client settings of `[registry]` (TLS, timeouts) apply to whichever URL wins; its
credentials (`CREDENTIAL_KEYS`) go only to the origin (scheme, host, port) its own `url`
names, as a Confluent client's `basic.auth.user.info` goes only to its `schema.registry.url`:
`[registry]` credentials without a `url`, or a `Pipeline(registry=...)` naming another origin,
fail at start in one line (not a silent run without them: the operator's file says which
registry production uses, and code pointing elsewhere is most often a leftover). Credentials
(these, or a URL's user info) over plain `http://` fail at start too, unless the registry is
on this machine (a loopback host). Likewise the subject strategy: the pipeline's, else the
file's, else Confluent's default (by topic).

```toml
[registry]
url = "https://registry.example:8081"
subject_name_strategy = "topic_record"
"basic.auth.user.info" = "${REGISTRY_USER}:${REGISTRY_PASSWORD}"
"ssl.ca.location" = "/etc/ssl/registry-ca.pem"
```

String values may name environment variables as `${VAR}`, as in `[kafka]`. An unknown key
fails at start in one line naming it and the accepted ones; no value is ever printed (it may
be a secret), and a URL (or each URL of a comma-separated list, which confluent-kafka's client
accepts) is shown without its user info.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from framework.core.declarations import check_subject_strategy
from framework.core.pipeline import Pipeline
from framework.errors import ConfigurationError
from framework.kafka.config import expand_env

log = logging.getLogger(__name__)

REGISTRY_ENV = "LOGWHEEL_SCHEMA_REGISTRY"
"""Environment variable naming the registry's URL (`[registry] url` and
`Pipeline(name, registry=URL)` win)."""

CREDENTIAL_KEYS = (
    "basic.auth.user.info",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "bearer.auth.token",
    "bearer.auth.logical.cluster",
    "bearer.auth.identity.pool.id",
    "bearer.auth.client.id",
    "bearer.auth.client.secret",
    "bearer.auth.scope",
    "bearer.auth.issuer.endpoint.url",
    "bearer.auth.issuer.endpoint.query",
)
"""Settings that say who the client is to the registry: they go only to `[registry] url`."""

CLIENT_KEYS = (
    *CREDENTIAL_KEYS,
    "basic.auth.credentials.source",
    "bearer.auth.credentials.source",
    "ssl.ca.location",
    "proxy",
    "timeout",
    "max.retries",
    "retries.wait.ms",
    "retries.max.wait.ms",
    "cache.capacity",
)
"""confluent-kafka `SchemaRegistryClient` settings `[registry]` passes through."""

LOOPBACK_NAMES = ("localhost",)
"""Host names taken as this machine (RFC 6761), beside loopback addresses (127/8, ::1)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}

OWN_KEYS = ("url", "subject_name_strategy")
"""`[registry]` keys of logwheel's own."""

_SOURCES = ("USER_INFO", "URL")  # basic.auth.credentials.source the Python client can serve


@dataclass(frozen=True)
class RegistrySettings:
    """A registry's URL, its client's settings (`client`, as confluent-kafka takes them) and
    the subject strategy ("topic", "record" or "topic_record"; None: "topic")."""

    url: str | None = None
    client: tuple[tuple[str, Any], ...] = ()
    strategy: str | None = None

    def __repr__(self) -> str:  # never the values: credentials live there
        keys = ", ".join(k for k, _ in self.client)
        url, strategy = redact(self.url), self.strategy
        return f"RegistrySettings(url={url!r}, client keys=[{keys}], strategy={strategy!r})"

    @property
    def subject_strategy(self) -> str:
        return self.strategy or "topic"


def registry_settings(table: Mapping[str, Any], origin: str) -> RegistrySettings:
    """The `[registry]` table of a config file (`origin` names it in errors), checked: unknown
    keys, values that are not strings, numbers or booleans, and unknown strategies fail in
    one line; `${VAR}` references are expanded."""
    accepted = (*OWN_KEYS, *CLIENT_KEYS)
    for key, value in table.items():
        if key not in accepted:
            raise ConfigurationError(
                f"{origin}: unknown key {key!r}; accepted: {', '.join(accepted)}"
            )
        if not isinstance(value, str | int | float | bool):
            raise ConfigurationError(f"{origin}: {key} must be a string or a number")
    settings = expand_env(table, origin)
    url = settings.pop("url", None)
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise ConfigurationError(f"{origin}: url must be http://HOST:PORT or https://HOST:PORT")
    strategy = settings.pop("subject_name_strategy", None)
    check_subject_strategy(f"{origin} subject_name_strategy", strategy)
    source = settings.pop("basic.auth.credentials.source", None)
    if source is not None and source not in _SOURCES:
        raise ConfigurationError(
            f"{origin}: basic.auth.credentials.source {source!r}: confluent-kafka's registry "
            f"client takes {' or '.join(_SOURCES)} (basic.auth.user.info, or user info in url)"
        )
    if source == "USER_INFO" and "basic.auth.user.info" not in settings:
        raise ConfigurationError(
            f"{origin}: basic.auth.credentials.source USER_INFO needs basic.auth.user.info"
        )
    keys = [k for k in CREDENTIAL_KEYS if k in settings]
    if keys and url is None:
        raise ConfigurationError(
            f"{origin}: {', '.join(keys)} without url: credentials go only to the registry "
            'they are for; name it with url = "https://HOST:PORT"'
        )
    return RegistrySettings(url, tuple(sorted(settings.items())), strategy)


def resolve(pipeline: Pipeline, settings: RegistrySettings | None) -> RegistrySettings | None:
    """The registry `pipeline` runs against: its URL by precedence (the pipeline's, the
    file's, the environment's), the file's client settings, the strategy by precedence; None
    when no URL is given anywhere."""
    settings = settings or RegistrySettings()
    url = pipeline.registry or settings.url or os.environ.get(REGISTRY_ENV) or None
    if url is None:
        return None
    keys = credentials(settings)
    if keys and (settings.url is None or not origins(url) <= origins(settings.url)):
        raise ConfigurationError(
            f"Pipeline(registry={redact(url)}) names another registry than [registry] url "
            f"{redact(settings.url)}, and [registry] credentials ({', '.join(keys)}) go only "
            "to the registry they are for: point both at the same one, or leave "
            "Pipeline(registry=...) out"
        )
    if pipeline.registry and settings.url and settings.url != pipeline.registry:
        _overridden(pipeline.registry, settings.url)
    strategy = pipeline.subject_strategy or settings.strategy
    return check_transport(RegistrySettings(url.rstrip("/"), settings.client, strategy))


def at_url(url: str | None) -> RegistrySettings | None:
    """The registry at `url`, else at `$LOGWHEEL_SCHEMA_REGISTRY`; None when neither names one.
    For tools given a URL alone (`ChangelogTable`, `schemas check --registry`)."""
    url = url or os.environ.get(REGISTRY_ENV)
    return check_transport(RegistrySettings(url.rstrip("/"))) if url else None


def credentials(settings: RegistrySettings) -> list[str]:
    """The settings among `settings.client` that identify the client to the registry."""
    return [key for key, _ in settings.client if key in CREDENTIAL_KEYS]


def check_transport(settings: RegistrySettings) -> RegistrySettings:
    """`settings`, unless they would send credentials (`CREDENTIAL_KEYS`, or a URL's user
    info) in clear: over `http://` to a host that is not this machine's loopback, a
    `ConfigurationError` naming the fix."""
    assert settings.url is not None
    keys = credentials(settings)
    for url in _split(settings.url):
        parts = urlsplit(url)
        sent = keys + (["the URL's user info"] if parts.username or parts.password else [])
        if sent and parts.scheme == "http" and not _loopback(parts.hostname):
            raise ConfigurationError(
                f"[registry] credentials ({', '.join(sent)}) would cross the network in clear "
                f"to {redact(url)}: use https:// (plain http:// only to a registry on this "
                "machine: 127.0.0.1, ::1 or localhost)"
            )
    return settings


def origins(urls: str) -> frozenset[tuple[str, str, int | None]]:
    """The origins (scheme, host, port; the scheme's default port when none is given) of a
    URL or of each URL of a comma-separated list."""
    found = set()
    for url in _split(urls):
        parts = urlsplit(url)
        try:
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:  # a port that is not a number: no origin it could match
            raise ConfigurationError(
                f"registry URL {redact(url)}: the port is not a number"
            ) from None
        found.add((parts.scheme.lower(), (parts.hostname or "").lower(), port))
    return frozenset(found)


def redact(url: str | None) -> str | None:
    """`url` without the user info it may carry (`https://user:secret@host` -> `https://host`),
    each URL of a comma-separated list alike."""
    if not url or "@" not in url:
        return url
    return ",".join(_redact_one(u) for u in url.split(","))


def _redact_one(url: str) -> str:
    parts = urlsplit(url.strip())
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _split(urls: str) -> list[str]:
    """The URLs of a comma-separated list, as confluent-kafka's client reads it."""
    return [u.strip() for u in urls.split(",") if u.strip()]


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@functools.cache
def _overridden(declared: str, configured: str) -> None:
    """Said once per process: the code's registry wins over the file's."""
    log.info(
        "Pipeline(registry=%s) wins over [registry] url %s", redact(declared), redact(configured)
    )
