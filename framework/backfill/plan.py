"""The plan of a backfill: what it reads, where it starts and ends, and how it is split, written
down before anything else so that a backfill that dies is finished, not started again.

A plan is made once, from where the computation stands (backfill/planning.py), and kept as
JSON on the compacted topic `<pipeline>.<computation>.backfill` (key `plan`), next to one
completion record per Spark task that committed (key `done/<plan id>/<task>`). This module is
the plan itself: its ranges and split, its JSON form and the checks of what is read back, and
the names on that topic.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.forgery import DEFAULT_ALLOWANCE_MS
from framework.core.pipeline import ComputationSpec, PipelineError
from framework.kafka.topics import COMPACT, TopicSpec

PLAN_KEY = "plan"


def backfill_topic(spec: ComputationSpec) -> str:
    """Where a computation's backfill plans and task completions live."""
    return f"{spec.group}.backfill"


def backfill_topic_spec(spec: ComputationSpec) -> TopicSpec:
    return TopicSpec(backfill_topic(spec), 1, dict(COMPACT), "backfill", True, (spec.name,))


def done_key(plan_id: str, task: int) -> str:
    return f"done/{plan_id}/{task}"


@dataclass(frozen=True)
class Range:
    """Offsets [start, end) of one topic-partition; `stream` is the input it carries and
    `keyed` says its Kafka key already is the computation's key (a `.by-key` topic, or an
    input read by its Kafka key), so its partition is the key-space partition."""

    topic: str
    partition: int
    start: int
    end: int
    stream: str
    keyed: bool


def co_partitioned(ranges: tuple[Range, ...]) -> int | None:
    """How many Spark tasks read `ranges` without a shuffle: one per topic-partition when every
    non-empty range is of one input read by its Kafka key (its partition is the key-space
    partition, so a key's records are all in one), else None (the records are grouped by key
    in a shuffle)."""
    ranges = tuple(r for r in ranges if r.end > r.start)
    if ranges and all(r.keyed for r in ranges) and len({r.topic for r in ranges}) == 1:
        return len(ranges)
    return None


def input_topics(spec: ComputationSpec) -> dict[str, tuple[str, bool]]:
    """Every topic a backfill of `spec` reads, with the input stream it carries and whether its
    Kafka key is the computation's key (`Range.stream`, `Range.keyed`): each input stream,
    and the `.by-key` topic of each input it re-keys. Not its replay topic: dead letters sent
    back by `logwheel dlq replay` wait there, their offsets untouched, for `logwheel run`."""
    topics = {}
    for i in spec.inputs:
        topics[i.stream] = (i.stream, i.key is None)
        if i.key is not None:
            topics[spec.by_key(i.stream)] = (i.stream, True)
    return topics


@dataclass(frozen=True)
class Plan:
    computation: str
    ranges: tuple[Range, ...]
    tasks: int
    changelog_end: dict[int, int]
    timers_end: dict[int, int]
    start_watermarks: dict[int, int]  # key-space partition -> input watermark it had
    end_watermark: int | None  # input watermark once the range is read; None: unknown
    lag: int  # the watermark trails the data by this much (BoundedOutOfOrderness)
    ids_end: dict[int, int] = field(default_factory=dict)  # the id journal's (with dedup)
    created_at: int = field(default_factory=now_ms)
    status: str = "running"

    @property
    def id(self) -> str:
        """Same ranges and split, same id: the transactional ids of its tasks derive from it."""
        what = json.dumps([self.computation, [asdict(r) for r in self.ranges], self.tasks])
        return hashlib.sha256(what.encode()).hexdigest()[:16]

    @property
    def start_watermark(self) -> int:
        """The watermark every task starts from: no record below it is processed on time."""
        return min(self.start_watermarks.values(), default=MIN_TIME)

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["id"] = self.id
        return json.dumps(doc).encode()

    @classmethod
    def from_json(cls, raw: bytes, allowance_ms: int = DEFAULT_ALLOWANCE_MS) -> Plan:
        """The plan `to_json` wrote, every field checked (names, types, ranges; watermarks no
        further ahead of wall time than `allowance_ms`; its id): PlanError otherwise, since
        anyone who can write the backfill topic could have written it."""
        try:
            return _decoded_plan(raw, now_ms() + allowance_ms)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise PlanError(
                f"the stored backfill plan is not one logwheel wrote ({error}): delete the "
                "computation's `.backfill` topic to plan the backfill afresh"
            ) from None

    def records(self) -> int:
        return sum(r.end - r.start for r in self.ranges)

    def most_tasks(self) -> int:
        """The most tasks the plan can give anything to: one per row at most, the rows being
        its records and its journals' (state, timers, ids) up to their ends."""
        journals = (self.changelog_end, self.timers_end, self.ids_end)
        return max(1, self.records() + sum(sum(ends.values()) for ends in journals))


class PlanError(PipelineError):
    """A stored backfill plan that fails its checks; the message names the fix."""


_RANGE_FIELDS = {"topic", "partition", "start", "end", "stream", "keyed"}
_PLAN_FIELDS = {f.name for f in fields(Plan)} | {"id"}
_OPTIONAL_FIELDS = {"id", "ids_end"}  # ids_end: plans written before dedup lack it
_STATUSES = ("running", "done")


def _int(doc: dict, name: str, low: int = MIN_TIME, high: int = 2**63 - 1) -> int:
    value = doc[name]
    if type(value) is not int or not low <= value <= high:
        raise PlanError(f"{name}={value!r} is not a whole number in [{low}, {high}]")
    return value


def _str(doc: dict, name: str) -> str:
    if type(doc[name]) is not str or not doc[name]:
        raise PlanError(f"{name}={doc[name]!r} is not a name")
    return doc[name]


def _exactly(doc: object, names: set[str], what: str) -> dict:
    if not isinstance(doc, dict) or set(doc) - names or (names - _OPTIONAL_FIELDS) - set(doc):
        raise PlanError(f"{what} has not exactly the fields {sorted(names)}")
    return doc


def _per_partition(doc: dict, name: str, low: int, high: int) -> dict[int, int]:
    table = doc[name]
    if not isinstance(table, dict):
        raise PlanError(f"{name} is not a table of partitions")
    out = {}
    for p in table:
        if not p.isdigit():
            raise PlanError(f"{name} names partition {p!r}")
        out[int(p)] = _int(table, p, low, high)
    return out


def _decoded_plan(raw: bytes, latest_time: int) -> Plan:
    doc = _exactly(json.loads(raw), _PLAN_FIELDS, "the plan")
    if not isinstance(doc["ranges"], list):
        raise PlanError("ranges is not a list")
    ranges = []
    for r in doc["ranges"]:
        r = _exactly(r, _RANGE_FIELDS, "a range")
        start = _int(r, "start", 0)
        if type(r["keyed"]) is not bool:
            raise PlanError(f"keyed={r['keyed']!r} is not true or false")
        ranges.append(
            Range(
                _str(r, "topic"),
                _int(r, "partition", 0),
                start,
                _int(r, "end", start),
                _str(r, "stream"),
                r["keyed"],
            )  # fmt: skip
        )
    end = None if doc["end_watermark"] is None else _int(doc, "end_watermark", high=latest_time)
    if doc["status"] not in _STATUSES:
        raise PlanError(f"status={doc['status']!r}")
    plan = Plan(
        computation=_str(doc, "computation"),
        ranges=tuple(ranges),
        tasks=_int(doc, "tasks", 1, 1_000_000),
        changelog_end=_per_partition(doc, "changelog_end", 0, 2**63 - 1),
        timers_end=_per_partition(doc, "timers_end", 0, 2**63 - 1),
        ids_end=_per_partition(doc, "ids_end", 0, 2**63 - 1) if "ids_end" in doc else {},
        start_watermarks=_per_partition(doc, "start_watermarks", MIN_TIME, latest_time),
        end_watermark=end,
        lag=_int(doc, "lag", 0),
        created_at=_int(doc, "created_at", 0, latest_time),
        status=doc["status"],
    )
    if "id" in doc and doc["id"] != plan.id:
        raise PlanError(f"id {doc['id']!r} is not its ranges' ({plan.id})")
    return plan
