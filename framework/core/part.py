"""The one shape of every part of a pipeline: a computation (a window and a join are
computations), a sink, an injector, and whoever queries the pipeline's state.

Whatever walks a pipeline — its topics, `logwheel status`, the dashboard, the graph, dead-letter
listing and replay, ACLs, `logwheel run` — asks each part through this protocol and never asks
what kind it is: a part says what it reads and writes, its consumer group, the topics it keeps
for itself and their policies, its dead-letter topic, whether its dead letters can be replayed
and its state queried, what it needs of Kafka's ACLs, its node in the graph, and which runtime
`logwheel run` runs it with. A new kind of part implements this and needs nothing of those
walkers.

Nothing here knows of Kafka's clients: topic policies and ACL operations are named, and
`framework.kafka.topics` and `framework.ops.acls` turn them into configs and rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Protocol

from framework.core.declarations import Input

OWN_TOPIC_OPERATIONS = ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")
"""On its own topics: `run` creates them if missing and reads its limits from their configs."""
RESET_OPERATIONS = ("DELETE",)
"""`logwheel reset --wipe-state` deletes and recreates a computation's state topics."""
READ_OPERATIONS = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
WRITE_OPERATIONS = ("WRITE", "DESCRIBE", "DESCRIBE_CONFIGS")
GROUP_OPERATIONS = ("READ", "DESCRIBE")
TRANSACTION_OPERATIONS = ("WRITE", "DESCRIBE")


@dataclass(frozen=True)
class OwnTopic:
    """A topic a part keeps for itself: its name, what it holds (changelog, timers, ids,
    watermarks, by-key, dlq, replay, replayed, ...), its partition count, how it is kept
    (`policy`: "compact", the latest value per key is the truth; "delete", at the broker's
    retention; "dlq", a dead-letter topic; "replay", for ever, since replayed dead letters keep
    their old timestamps), and whether that count must be exactly this (keyed state, a
    co-partitioned reader or a one-partition channel depends on it)."""

    name: str
    kind: str
    partitions: int
    policy: str
    exact: bool


@dataclass(frozen=True, order=True)
class Grant:
    """What a part's principal may do on Kafka: `operations` on the `resource` ("TOPIC",
    "GROUP", "TRANSACTIONAL_ID") named `name`, a prefix when `pattern` is "PREFIXED" (else
    "LITERAL")."""

    resource: str
    pattern: str
    name: str
    operations: tuple[str, ...]


class Graph(Protocol):
    """What a part asks of the pipeline around it (a `Pipeline`)."""

    def channels_of(self, stream: str) -> list[str]:
        """The watermark channels a reader of `stream` learns its watermark from."""


class Part(Protocol):
    """One part of a pipeline, as everything that walks a pipeline sees it."""

    pipeline: str
    name: str

    @property
    def kind(self) -> str:
        """What it is, for pictures and messages: "computation", "window", "join", "sink",
        "injector", "queries"."""

    @property
    def runtime(self) -> str | None:
        """Which runtime `logwheel run` runs it with ("keyed": tasks over its key space; "sink":
        tasks writing into an outside system); None: not run by `logwheel run`."""

    @property
    def group(self) -> str | None:
        """Its consumer group, None if it reads through none."""

    @property
    def dlq(self) -> str | None:
        """Its dead-letter topic, None if it keeps none."""

    @property
    def replayable(self) -> bool:
        """Whether `logwheel dlq replay` can send its dead letters back to it."""

    @property
    def queryable(self) -> bool:
        """Whether `logwheel run --serve` answers queries of its state."""

    @property
    def inputs(self) -> tuple[Input, ...]:
        """The streams it reads, each with its key extractor (None: as partitioned)."""

    @property
    def outputs(self) -> Mapping[str, str | None]:
        """The streams it writes, each with its schema (None: JSON)."""

    @property
    def formats(self) -> Mapping[str, str]:
        """How outputs are written, where declared (stream -> "avro", "confluent", "json")."""

    @property
    def consumed_topics(self) -> Sequence[str]:
        """What its group reads, partition by partition: a row each in `logwheel status`."""

    @property
    def subscribed_topics(self) -> Sequence[str]:
        """What its group subscribes to: what it consumes, and its replayed dead letters."""

    @property
    def keyed_topics(self) -> Sequence[str]:
        """The topics whose partition p is its task p (none for a part without a key space)."""

    @property
    def partitions(self) -> int:
        """The partitions of its key space (0: it has none)."""

    @property
    def watermarks(self) -> str | None:
        """The channel its watermark is published on, None if it publishes none."""

    @property
    def node(self) -> str | None:
        """Its node in the graph (`logwheel graph`, the dashboard), None if it is not drawn."""

    @property
    def detail(self) -> str:
        """One line under its name in the graph."""

    def own_topics(self) -> list[OwnTopic]:
        """The topics it keeps for itself, with their policies."""

    def tables_read(self) -> list[tuple[str, str, str]]:
        """(name, topic, "table" or "global table") of each table it reads."""

    def grants(self, graph: Graph, *, reset: bool = False) -> list[Grant]:
        """Everything its principal needs on Kafka, and nothing more (with `reset`, also what
        `logwheel reset --wipe-state` of it needs)."""


class Unrun:
    """The answers of a part `logwheel run` does not run (an injector runs in its user's
    program, the queries in whoever asks): no group of its own, no key space, no dead
    letters, not drawn. A part's spec takes these and says what differs."""

    runtime = None
    group = None
    dlq = None
    replayable = False
    queryable = False
    inputs: ClassVar[tuple[Input, ...]] = ()
    outputs: ClassVar[Mapping[str, str | None]] = MappingProxyType({})
    formats: ClassVar[Mapping[str, str]] = MappingProxyType({})
    consumed_topics: ClassVar[tuple[str, ...]] = ()
    subscribed_topics: ClassVar[tuple[str, ...]] = ()
    keyed_topics: ClassVar[tuple[str, ...]] = ()
    partitions = 0
    watermarks: str | None = None
    node = None
    detail = ""

    def own_topics(self) -> list[OwnTopic]:
        return []

    def tables_read(self) -> list[tuple[str, str, str]]:
        return []


def reader_group(owner: str) -> str:
    """The group id of the assign-only consumers of `owner` (a part's group, or a pipeline's
    name): under its prefix, so a prefixed group grant covers it."""
    return f"{owner}.reader"


def serving_topic(group: str) -> str:
    """Where the instances of the computation whose group is `group` say they answer queries
    (framework/query/directory.py)."""
    return f"{group}.serving"


def own_topic(part: Part, kind: str) -> str | None:
    """The topic `part` keeps for itself holding `kind` (its "replay", its "replayed", ...),
    None if it keeps none."""
    return next((t.name for t in part.own_topics() if t.kind == kind), None)


def literal(topics: set[str] | list[str], operations: tuple[str, ...]) -> list[Grant]:
    """`operations` on each of `topics`, by name."""
    return [Grant("TOPIC", "LITERAL", topic, operations) for topic in sorted(set(topics))]
