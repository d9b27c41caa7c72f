"""A Schema Registry reached through its Confluent-compatible REST API, with confluent-kafka's
own `SchemaRegistryClient` (the client every Python team on Kafka uses, so logwheel sees the
registry exactly as they do), configured by `RegistrySettings`
(framework/kafka/registry_settings.py).

`Registry` is the `SchemaSource` the wire format (framework/serde/confluent.py) needs: schemas
by id, ids by registering under a subject (chosen by confluent-kafka's own subject name
strategies). The client caches both, so the per-record path never makes a request once an id
has been seen. `connect` asks the registry once at start: one that does not answer is a
`ConfigurationError` in one line naming its URL.

Mid-run, an answer is read for what it is about:

- about the id (404: no such schema; 401/403: this job may not read it, e.g. under access
  control per subject; 410, 422: the registry cannot give it): `UnreadableSchemaId`, a bad
  record dead-lettered at stage "decode" with the registry's own words, while the rest flows.
  A partition held at such a record would wait for good: the answer does not change by asking.
- about the registry (no connection, a timeout, 5xx, 429, 408, or any other answer):
  `RegistryUnavailable`, the record's partition waits for it with backoff
  (framework/streaming/holds.py); nothing is dead-lettered.

Answers about an id are remembered for `REFUSED_TTL_S`, at most `CACHE_SIZE` of them, and the
client's own cache of schemas by id (unbounded in confluent-kafka) is emptied every
`CACHE_SIZE` ids fetched, so no stream of ids, good or bad, grows memory without bound.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from cachetools import TTLCache
from confluent_kafka.schema_registry import (
    RegisteredSchema,
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from framework.errors import ConfigurationError, ServiceUnavailable
from framework.kafka.registry_settings import (
    REGISTRY_ENV,
    RegistrySettings,
    check_transport,
    redact,
)
from framework.serde.catalogue import default_schemas
from framework.serde.codecs import DecodeError
from framework.serde.confluent import WireFormat

__all__ = [
    "REGISTRY_ENV",
    "Registry",
    "RegistryConfigurationError",
    "RegistryUnavailable",
    "UnreadableSchemaId",
    "connect",
]

TIMEOUT_S = 5
"""How long one request to the registry may take."""

CLIENT_DEFAULTS = {"timeout": TIMEOUT_S, "max.retries": 1, "retries.wait.ms": 100}
"""The client's own retries stay short (at most about 10 s for a registry that hangs, within
the membership's loop): a registry away mid-run is waited for by holding the record's partition,
with backoff, while the consumer keeps polling. `[registry]` may set them otherwise."""

REFUSED_TTL_S = 30.0
"""How long an answer about an id (404, 401/403, 410, 422) stands for later records with that
id without asking again. Long enough that a burst of records framed with one id the job may
not read costs one request, not one per record (each a round trip to a registry other jobs
share); short enough that an id registered a moment ago on the registry's leader but not yet
on the follower that answered, or a read permission granted by the operator, is seen within
half a minute (the records dead-lettered meanwhile go back with `logwheel dlq replay`)."""

CACHE_SIZE = 1000
"""How many schema ids each cache of registry answers holds (refused ids here, writer schemas
in framework/serde/confluent.py): confluent-kafka's own default `cache.capacity`. Records
framed with ever new ids (a hostile writer) evict old entries instead of growing memory."""

_ABOUT_THE_ID = (401, 403, 404, 410, 422)
"""HTTP statuses (and Confluent error code classes, 40403 -> 404) that answer about the id
asked for, not about the registry's health."""
_ANSWER_MAX = 300  # characters of the registry's words kept in a dead letter's reason
_T = TypeVar("_T")

_STRATEGIES = {
    "topic": topic_subject_name_strategy,
    "record": record_subject_name_strategy,
    "topic_record": topic_record_subject_name_strategy,
}


class RegistryConfigurationError(ConfigurationError):
    """A registry that cannot be reached, or refuses a schema: the message names the URL and
    what to do."""


class RegistryUnavailable(ServiceUnavailable):
    """The registry did not answer a request made mid-run. Not a bad record (the record is
    fine, the registry is away): the decode stage lets it through, and the loop holds the
    record's partition at it and reads it again with backoff, so nothing is lost, skipped or
    dead-lettered."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"the Schema Registry at {url}", reason)


class UnreadableSchemaId(DecodeError):
    """The registry answered about this id itself: it has no such schema (404), will not give
    it to this job (401/403), or cannot (410, 422). A bad record, dead-lettered with the
    registry's words, never a retry: asking again gets the same answer."""

    def __init__(self, schema_id: int, status: int, reason: str) -> None:
        super().__init__(reason)
        self.schema_id = schema_id
        self.status = status


class Registry:
    """One registry's Confluent-compatible API, through confluent-kafka's client."""

    def __init__(
        self, settings: RegistrySettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        assert settings.url is not None
        self.url = redact(settings.url.rstrip("/"))  # what messages show
        check_transport(settings)  # however the settings were made: never in clear
        try:
            self.client = SchemaRegistryClient(
                {**CLIENT_DEFAULTS, **dict(settings.client), "url": settings.url}
            )
        except (ValueError, TypeError) as error:  # its messages name settings, not values
            raise RegistryConfigurationError(
                f"[registry] settings for {self.url} are refused by confluent-kafka's "
                f"client: {error}"
            ) from None
        self._refused: TTLCache[int, UnreadableSchemaId] = TTLCache(
            CACHE_SIZE, REFUSED_TTL_S, timer=clock
        )
        self._fetched = 0  # ids fetched since the client's cache was last emptied
        self._lock = threading.Lock()

    def schema(self, schema_id: int) -> str:
        """The schema text registered with `schema_id`: `UnreadableSchemaId` when the registry
        answers about the id (none, or not for this job), `RegistryUnavailable` when it does
        not answer or cannot serve now."""
        with self._lock:
            refused = self._refused.get(schema_id)
        if refused is not None:
            raise UnreadableSchemaId(schema_id, refused.status, str(refused))
        try:
            text = self.client.get_schema(schema_id).schema_str
        except SchemaRegistryError as error:
            about = _about_the_id(error)
            if about is None:
                raise RegistryUnavailable(
                    self.url, f"the Schema Registry at {self.url} failed: {error}"
                ) from None
            refused = UnreadableSchemaId(schema_id, about, self._refusal(schema_id, about, error))
            with self._lock:
                self._refused[schema_id] = refused
            raise refused from None
        except Exception as error:  # httpx's transport errors: the registry is away
            raise RegistryUnavailable(
                self.url,
                f"the Schema Registry at {self.url} does not answer "
                f"({type(error).__name__}: {error})",
            ) from None
        with self._lock:
            self._fetched += 1
            if self._fetched >= CACHE_SIZE:  # the client keeps every id it ever fetched
                self._fetched = 0
                self.client.clear_caches()
        return text

    def _refusal(self, schema_id: int, about: int, error: SchemaRegistryError) -> str:
        """A dead letter's reason: the id, the registry and its own words."""
        said = " ".join(str(error.error_message).split())[:_ANSWER_MAX]
        if about == 404:
            what = f"unknown schema id {schema_id}: the Schema Registry at {self.url} has none"
        elif about in (401, 403):
            what = f"schema id {schema_id}: the Schema Registry at {self.url} refuses this job"
        else:
            what = f"schema id {schema_id}: the Schema Registry at {self.url} cannot give it"
        return f"{what} (HTTP {error.http_status_code}, error {error.error_code}): {said}"

    def register(self, subject: str, schema: str) -> int:
        """The id of `schema` under `subject`, registered as its next version if need be; a
        schema the subject's compatibility level refuses is a `RegistryConfigurationError`."""
        try:
            return self.client.register_schema(subject, Schema(schema, "AVRO"))
        except SchemaRegistryError as error:
            if error.http_status_code == 409:
                raise RegistryConfigurationError(
                    f"the registry at {self.url} refuses the schema for subject {subject!r} "
                    f"({error.error_message}): make it compatible with the subject's latest "
                    "version (`logwheel schemas check --registry`) or change the subject's "
                    "compatibility level"
                ) from None
            raise RegistryConfigurationError(
                f"the registry at {self.url} cannot register subject {subject!r}: {error}"
            ) from None
        except Exception as error:  # away: a start fails on it, a task created mid-run waits
            raise RegistryUnavailable(self.url, _unreachable(self.url, error)) from None

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
                    raise RegistryConfigurationError(
                        self._failed("give a compatibility level", error)
                    ) from None
            except Exception as error:
                raise RegistryConfigurationError(_unreachable(self.url, error)) from None
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
            raise RegistryConfigurationError(self._failed(what, error)) from None
        except Exception as error:
            raise RegistryConfigurationError(_unreachable(self.url, error)) from None

    def _failed(self, what: str, error: SchemaRegistryError) -> str:
        return f"the registry at {self.url} cannot {what}: {error}"

    def ping(self) -> None:
        """One request, so that a registry that is down fails the start in one line."""
        try:
            self.client.get_subjects()
        except SchemaRegistryError as error:
            fix = (
                ": check the credentials in [registry]"
                if error.http_status_code in (401, 403)
                else ""
            )
            raise RegistryConfigurationError(
                self._failed("list its subjects", error) + fix
            ) from None
        except Exception as error:
            raise RegistryConfigurationError(_unreachable(self.url, error)) from None


def _about_the_id(error: SchemaRegistryError) -> int | None:
    """The status an error answers about the id asked for with (its HTTP status, else its
    Confluent error code's class: 40403 is a 404); None when it is about the registry."""
    code = error.error_code if isinstance(error.error_code, int) else -1
    for status in (error.http_status_code, code // 100):
        if status in _ABOUT_THE_ID:
            return status
    return None


def _unreachable(url: str, error: BaseException) -> str:
    return (
        f"the Schema Registry at {url} does not answer ({type(error).__name__}: {error}): "
        f"start it (`logwheel registry start`) or point Pipeline(..., registry=URL), "
        f"[registry] url in --config or {REGISTRY_ENV} at a running one"
    )


@functools.cache
def connect(settings: RegistrySettings) -> Registry:
    """The registry `settings` name, asked once (`RegistryConfigurationError` if it does not
    answer); one client per registry and process, so its caches serve every task."""
    registry = Registry(settings)
    registry.ping()
    return registry


def subject_namer(strategy: str) -> Callable[[str, str], str]:
    """(topic, record full name) -> subject of a value, by one of confluent-kafka's own
    subject name strategies ("topic", "record", "topic_record")."""
    name = _STRATEGIES[strategy]
    return lambda topic, record: name(SerializationContext(topic, MessageField.VALUE), record)


@functools.cache
def wire_format(settings: RegistrySettings) -> WireFormat:
    """The wire format's codecs against the registry `settings` name, over the job's schemas,
    writers registering under the settings' subject strategy."""
    return WireFormat(
        connect(settings), default_schemas(), subject_namer(settings.subject_strategy)
    )
