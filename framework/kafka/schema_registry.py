"""A Schema Registry reached through its Confluent-compatible REST API, with confluent-kafka's
own `SchemaRegistryClient` (the client every Python team on Kafka uses, so logwheel sees the
registry exactly as they do).

`Registry` is the `SchemaSource` the wire format (framework/serde/confluent.py) needs: schemas
by id, ids by registering under a subject. The client caches both, so the per-record path never
makes a request once an id has been seen. `connect` asks the registry once at start: one that
does not answer is a `ConfigurationError` in one line naming its URL.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from framework.errors import ConfigurationError, Retry
from framework.serde.codecs import default_schemas
from framework.serde.confluent import UnknownSchemaId, WireFormat

REGISTRY_ENV = "LOGWHEEL_SCHEMA_REGISTRY"
"""Environment variable naming the registry's URL (`Pipeline(name, registry=URL)` wins)."""

TIMEOUT_S = 10
"""How long one request to the registry may take."""

_NOT_FOUND = (40401, 40402, 40403)  # subject, version, schema not found
_T = TypeVar("_T")


class RegistryError(ConfigurationError):
    """A registry that cannot be reached, or refuses a schema: the message names the URL and
    what to do."""


class RegistryUnavailable(Retry):
    """The registry did not answer a request made mid-run. Not a bad record (the record is
    fine, the registry is away): the decode stage lets it through, and the runner rejoins and
    reads again from the last commit, so nothing is lost or dead-lettered."""


class Registry:
    """One registry's Confluent-compatible API, through confluent-kafka's client."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.client = SchemaRegistryClient(
            {"url": self.url, "timeout": TIMEOUT_S, "max.retries": 2}
        )

    def schema(self, schema_id: int) -> str:
        """The schema text registered with `schema_id`; `UnknownSchemaId` if there is none."""
        try:
            return self.client.get_schema(schema_id).schema_str
        except SchemaRegistryError as error:
            if error.http_status_code == 404 or error.error_code in _NOT_FOUND:
                raise UnknownSchemaId(schema_id) from None
            raise RegistryUnavailable(f"the registry at {self.url} failed: {error}") from error
        except Exception as error:  # httpx's transport errors: the registry is away
            raise RegistryUnavailable(
                f"the registry at {self.url} does not answer: {type(error).__name__}: {error}"
            ) from error

    def register(self, subject: str, schema: str) -> int:
        """The id of `schema` under `subject`, registered as its next version if need be; a
        schema the subject's compatibility level refuses is a `RegistryError`."""
        try:
            return self.client.register_schema(subject, Schema(schema, "AVRO"))
        except SchemaRegistryError as error:
            if error.http_status_code == 409:
                raise RegistryError(
                    f"the registry at {self.url} refuses the schema for subject {subject!r} "
                    f"({error.error_message}): make it compatible with the subject's latest "
                    "version (`logwheel schemas check --registry`) or change the subject's "
                    "compatibility level"
                ) from None
            raise RegistryError(
                f"the registry at {self.url} cannot register subject {subject!r}: {error}"
            ) from None
        except Exception as error:
            raise RegistryError(_unreachable(self.url, error)) from None

    def subjects(self) -> list[str]:
        """Every subject the registry has."""
        return self._ask(self.client.get_subjects, "list its subjects")

    def latest(self, subject: str) -> RegisteredSchema:
        """The latest version of `subject`: its schema, id and version number."""
        return self._ask(
            lambda: self.client.get_latest_version(subject), f"give subject {subject!r}'s latest"
        )

    def compatibility(self, subject: str) -> str | None:
        """The compatibility level of `subject`, else the registry's global one; None when
        neither is set."""
        for name in (subject, None):
            try:
                return self.client.get_compatibility(name)
            except SchemaRegistryError as error:
                if error.http_status_code != 404:
                    raise RegistryError(self._failed("give a compatibility level", error)) from None
            except Exception as error:
                raise RegistryError(_unreachable(self.url, error)) from None
        return None

    def accepts(self, subject: str, schema: str) -> bool:
        """Whether the registry's own check (under the subject's level) accepts `schema` as
        the subject's next version."""
        return self._ask(
            lambda: self.client.test_compatibility(subject, Schema(schema, "AVRO")),
            f"check a schema against subject {subject!r}",
        )

    def _ask(self, call: Callable[[], _T], what: str) -> _T:
        try:
            return call()
        except SchemaRegistryError as error:
            raise RegistryError(self._failed(what, error)) from None
        except Exception as error:
            raise RegistryError(_unreachable(self.url, error)) from None

    def _failed(self, what: str, error: SchemaRegistryError) -> str:
        return f"the registry at {self.url} cannot {what}: {error}"

    def ping(self) -> None:
        """One request, so that a registry that is down fails the start in one line."""
        try:
            self.client.get_subjects()
        except Exception as error:
            raise RegistryError(_unreachable(self.url, error)) from None


def _unreachable(url: str, error: BaseException) -> str:
    return (
        f"the Schema Registry at {url} does not answer ({type(error).__name__}: {error}): "
        f"start it (`logwheel registry start`) or point {REGISTRY_ENV} or "
        "Pipeline(..., registry=URL) at a running one"
    )


def registry_url(declared: str | None) -> str | None:
    """The registry of a pipeline: the one it declares, else `$LOGWHEEL_SCHEMA_REGISTRY`."""
    return declared or os.environ.get(REGISTRY_ENV) or None


@functools.cache
def connect(url: str) -> Registry:
    """The registry at `url`, asked once (`RegistryError` if it does not answer); one client
    per URL and process, so its caches serve every task."""
    registry = Registry(url)
    registry.ping()
    return registry


@functools.cache
def wire_format(url: str) -> WireFormat:
    """The wire format's codecs against the registry at `url`, over the job's schemas."""
    return WireFormat(connect(url), default_schemas())
