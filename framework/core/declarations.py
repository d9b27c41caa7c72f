"""What a pipeline's streams and inputs are declared with: the names it accepts, how a
stream is written (`FORMATS`), the watermark policies of sources, key extractors, and the
checks every declaration goes through. `framework.core.pipeline` builds on these (and
re-exports them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from framework.core.api import Record
from framework.errors import ConfigurationError

NAME = re.compile(r"[a-z][a-z0-9-]*")
STREAM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""Names are checked with `fullmatch` (a `$` anchor with `match` lets "zz\\n" through)."""
TOPIC_MAX = 249
"""Kafka's limit on the length of a topic name; every topic a declaration implies must fit."""
GUARANTEES = ("exactly_once", "at_least_once")
ERROR_POLICIES = ("dead_letter", "skip", "stop")
LATE_POLICIES = ("drop", "dead_letter")
EMITS = ("final", "update")
FORMATS = ("avro", "confluent", "json")
"""How a stream is written: Avro single-object encoding ("avro", with a schema), the Confluent
wire format against a Schema Registry ("confluent": with a schema, or for a source read as
its writers wrote it), or UTF-8 JSON ("json", without a schema: in a pipeline with a registry,
a stream that names no format is in the wire format)."""
SUBJECT_STRATEGIES = ("topic", "record", "topic_record")
"""Under which Schema Registry subject a writer registers a stream's schema: `<topic>-value`
("topic", Confluent's TopicNameStrategy, the default), the record's full name ("record",
RecordNameStrategy), or `<topic>-<record full name>` ("topic_record",
TopicRecordNameStrategy). Readers resolve schemas by id, whatever the strategy."""
INTERNAL_KINDS = ("changelog", "timers", "watermarks", "dlq", "ids", "replay", "replayed")
INTERNAL_KINDS += ("backfill",)  # a computation's backfill plans (framework/backfill/plan.py)
INTERNAL_KINDS += ("serving",)  # where its instances answer queries (framework/query/directory.py)
"""The last part of every topic a computation, injector or sink keeps for itself under
`<pipeline>.<owner>.` (each part names its own: framework/core/part.py); a re-keyed input's
topic is `<pipeline>.<computation>.<stream>.by-key`."""
INTERNAL_TOPIC = re.compile(
    rf"(?P<pipeline>{NAME.pattern})\.(?P<owner>{NAME.pattern})\."
    rf"(?:(?P<kind>{'|'.join(INTERNAL_KINDS)})|(?P<stream>{STREAM.pattern})\.by-key)"
)
"""Any pipeline's internal topic, whichever pipeline: checked with `fullmatch`."""
DEFAULT_PARTITIONS = 4
DEFAULT_HOOK_TIMEOUT_MS = 60_000
"""How long one call of a part's own code (a hook, a key extractor) may run by default before
the watchdog abandons it."""
DEFAULT_MAX_FUTURE_MS = 300_000
"""How far ahead of wall time a source's records may move its watermark (and a mark or a
watermark promise may claim): five minutes of clock skew."""
FUTURE_POLICIES = ("count", "dead_letter")


class PipelineError(ConfigurationError):
    """A pipeline declaration that cannot run; the message says what to change."""


KeyExtractor = Callable[[Record], str]


class key_by:  # noqa: N801 - reads as a function at the call site, as in the contract
    """Key extractor that takes `field` of the decoded value, as a string."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __call__(self, record: Record) -> str:
        value = record.value
        if not isinstance(value, Mapping) or self.field not in value:
            raise KeyError(f"record has no field {self.field!r} to key by")
        return str(value[self.field])

    def __repr__(self) -> str:
        return f"key_by({self.field!r})"


@dataclass(frozen=True)
class BoundedOutOfOrderness:
    """Watermark of a stream written from outside: the highest timestamp seen on a partition,
    less `ms`. A partition silent for `idle_ms` of wall time stops holding the watermark back.

    `live=True` is for producers that stamp records with the current time: a partition silent
    for `idle_ms` then has the watermark wall time less `ms`, so the last windows close without
    new records. Without it a silent partition holds its watermark, so a replay of old data
    that pauses never turns its records late.

    A record stamped more than `max_future_ms` ahead of wall time (a producer with a wrong
    clock, or a hostile one) does not move the watermark at all and is counted in
    `logwheel_future_records_total`; it is processed filed at wall time plus `max_future_ms`,
    or with `on_future="dead_letter"` sent to the dead-letter topic (stage "future") instead
    (core/future_records.py)."""

    ms: int
    idle_ms: int = 5_000
    live: bool = False
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS
    on_future: str = "count"

    def __post_init__(self) -> None:
        if self.ms < 0 or self.idle_ms <= 0:
            raise PipelineError(
                "BoundedOutOfOrderness needs ms >= 0 and idle_ms > 0, e.g. "
                "BoundedOutOfOrderness(ms=2000, idle_ms=5000)"
            )
        check_future("BoundedOutOfOrderness", self.max_future_ms, self.on_future)


@dataclass(frozen=True)
class InjectorWatermark:
    """Watermark of a stream written by a logwheel `Injector` named `injector`, run as
    `processes` processes; it is the minimum of what every one of them published."""

    injector: str
    processes: int = 1
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS
    """A promise further ahead of wall time is published as wall time plus this."""

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.injector) or self.processes < 1:
            raise PipelineError(
                "InjectorWatermark needs a name like 'query-generator' and processes >= 1"
            )
        check_future("InjectorWatermark", self.max_future_ms, "count")


def check_future(where: str, max_future_ms: object, on_future: object) -> None:
    """The skew allowance of a watermark policy: a non-negative int of ms, and what to do with
    a record beyond it."""
    if type(max_future_ms) is not int or max_future_ms < 0:
        raise PipelineError(
            f"{where}: max_future_ms={max_future_ms!r}; use a whole number of ms >= 0, e.g. "
            f"max_future_ms={DEFAULT_MAX_FUTURE_MS} (five minutes)"
        )
    if on_future not in FUTURE_POLICIES:
        raise PipelineError(f"{where}: on_future={on_future!r}; use one of {FUTURE_POLICIES}")


WatermarkPolicy = BoundedOutOfOrderness | InjectorWatermark


@dataclass(frozen=True)
class Percentile:
    """A computation's percentile low watermark (MillWheel §7.2): its timers and windows fire
    on the largest time that upstream partitions holding at least `fraction` of the recent
    input (each weighted by its record rate over the last minute) have passed, instead of the
    strict minimum over all of them. Records behind it are late and follow the late policy;
    the computation still publishes the strict watermark downstream. 1.0 is the strict one."""

    fraction: float

    def __post_init__(self) -> None:
        number = isinstance(self.fraction, int | float) and not isinstance(self.fraction, bool)
        if not number or not 0 < self.fraction <= 1:
            raise PipelineError(
                f"Percentile({self.fraction!r}): give the fraction of the recent input to wait "
                "for, 0 < fraction <= 1, e.g. Percentile(0.99)"
            )


@dataclass(frozen=True)
class Source:
    stream: str
    schema: str | None
    watermark: WatermarkPolicy | None
    format: str | None = None


@dataclass(frozen=True)
class Input:
    """One input stream of a computation; `key` None keeps the Kafka key."""

    stream: str
    key: KeyExtractor | None

    def route(self, record: Record) -> str:
        """The key `record` is processed under: the extractor's result, else its Kafka key.

        The one rule for every runtime (Kafka, Harness, Spark): an extractor must return a
        str; anything else (None, an int) raises TypeError, so the record is dead-lettered
        at stage "key" instead of being processed under an accidental key such as "None"."""
        if self.key is None:
            return record.key
        routed = self.key(record)
        if type(routed) is not str:
            raise TypeError(
                f"key extractor {self.key!r} of input {self.stream!r} returned "
                f"{type(routed).__name__}, not str: return a str key, or use key_by(field)"
            )
        return routed


def check_stream(stream: str) -> None:
    if not isinstance(stream, str) or not STREAM.fullmatch(stream):
        raise PipelineError(
            f"stream name {stream!r} is not a valid Kafka topic name: it must match "
            "[A-Za-z0-9][A-Za-z0-9._-]* (letters, digits, '.', '_', '-')"
        )
    check_topic_length(stream, "stream")


def check_name(what: str, name: str) -> None:
    """A pipeline, computation, table or injector name: [a-z][a-z0-9-]*, the whole of it."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise PipelineError(f"{what} name {name!r} must match [a-z][a-z0-9-]*, e.g. 'zeitgeist'")


def check_topic_length(topic: str, what: str) -> None:
    """Kafka refuses a topic name longer than 249 characters: refuse it at declaration."""
    if len(topic) > TOPIC_MAX:
        raise PipelineError(
            f"{what} topic {topic[:40]}... is {len(topic)} characters, over Kafka's "
            f"{TOPIC_MAX}-character limit on topic names: use shorter names"
        )


def check_outside(stream: str, prefixes: Mapping[str, str]) -> None:
    """A stream may not be named inside a computation's or injector's internal prefix
    (`<pipeline>.<owner>.`): that owner's ACLs grant the whole prefix, and a stream there
    would let a writer of the stream forge its changelog, timers or marks."""
    for owner, prefix in prefixes.items():
        if stream.startswith(prefix):
            raise PipelineError(
                f"stream {stream!r} is inside {owner}'s internal prefix {prefix!r}: "
                "streams may not be named like another computation's internal topics; "
                "rename the stream"
            )


def internal_topic(topic: str) -> str | None:
    """What `topic` is if some pipeline keeps it for itself ("the changelog of 'count' in
    pipeline 'billing'"), else None. Any pipeline's, not only this one's: streams are global,
    and a stream named like another pipeline's changelog is that changelog."""
    found = INTERNAL_TOPIC.fullmatch(topic)
    if found is None:
        return None
    kind = found["kind"] or f"repartition topic of {found['stream']!r}"
    return f"the {kind} of {found['owner']!r} in pipeline {found['pipeline']!r}"


def check_writable(stream: str, where: str) -> None:
    """A stream a pipeline writes (an output, an injector's stream) may not be named like any
    pipeline's internal topic: `logwheel acls` grants Write on what a pipeline writes, and a
    write there would forge that pipeline's state, timers or marks. `where` names the
    declaration ("computation 'c': output")."""
    internal = internal_topic(stream)
    if internal is not None:
        head, _, last = stream.rpartition(".")
        raise PipelineError(
            f"{where} {stream!r} is named like {internal}: a pipeline may not write another's "
            f"internal topics; rename the stream, e.g. {head + '-' + last!r}"
        )


def check_format(where: str, fmt: str | None, schema: str | None = None) -> None:
    """A format of `FORMATS`; "json" only for a stream without a schema."""
    if fmt is not None and fmt not in FORMATS:
        raise PipelineError(f"{where}: format={fmt!r}; use one of {FORMATS} (or leave it out)")
    if fmt == "json" and schema is not None:
        raise PipelineError(
            f"{where}: format='json' with schema {schema!r}: a stream with a schema is Avro; "
            "leave the schema out for JSON, or use format='avro' or 'confluent'"
        )


def check_wire_schema(stream: str, fmt: str, schema: str | None) -> None:
    """Refuse, naming the fix, to write `stream` in the wire format ("confluent") without a
    schema: a writer registers its schema, and JSON in a pipeline with a registry says so."""
    if fmt == "confluent" and schema is None:
        raise PipelineError(
            f"stream {stream!r} is in the Confluent wire format (the pipeline has a Schema "
            "Registry), which needs a schema to write: give it one, or keep it JSON with "
            f"formats={{{stream!r}: 'json'}} (output_format='json' on a windowed computation, "
            "format='json' on a source)"
        )


def check_subject_strategy(where: str, strategy: str | None) -> None:
    if strategy is not None and strategy not in SUBJECT_STRATEGIES:
        raise PipelineError(
            f"{where}: subject strategy {strategy!r}; use one of {SUBJECT_STRATEGIES} "
            "(Confluent's TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy)"
        )


def check_schema(schema: str) -> None:
    if not isinstance(schema, str) or "." not in schema:
        raise PipelineError(
            f"schema {schema!r} must be a full Avro name like 'zeitgeist.SearchQuery' "
            "with a file schemas/<name>.avsc"
        )
