"""What `logwheel ui` shows, as the JSON of `/api/pipeline`: the pipeline's graph placed for
drawing, and per computation and partition the figures of `logwheel status` (the same rows,
from `framework.ops.status.status`) with what a picture needs beside them — standby replicas,
records per second, dead letters by stage with the command that replays them, state size, and
which partition holds a watermark back.

`gather` asks Kafka; `assemble` is the pure rest, tested without a broker."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.core.clock import now_ms
from framework.core.part import Part, own_topic, reader_group
from framework.core.pipeline import Pipeline
from framework.kafka.config import client_config, consumer_config
from framework.kafka.topic_ends import watermark_offsets
from framework.ops.dead_letter_counts import dead_letters_by_stage
from framework.ops.holdback import describe_producer
from framework.ops.layout import layout
from framework.ops.members import group_members, standbys
from framework.ops.status import Status, status
from framework.ops.topology import topology

REFRESH_MS = 3_000
"""How often the page asks again, and the server gathers new figures."""
HELD_BACK_MS = 10_000
"""A partition whose watermark is this far behind the most advanced partition of the same
topic (or still unknown while another's is known) is flagged as holding the watermark back."""


@dataclass
class Facts:
    """What one look at the cluster found, besides `logwheel status`'s rows."""

    now: int
    rows: list[Status]
    standbys: dict[str, dict[int, list[str]]] = field(default_factory=dict)  # per computation
    dead_letters: dict[str, dict[str, int]] = field(default_factory=dict)  # stage -> count
    state_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    """Per computation and partition, the offsets its changelog partition spans: the state's
    keys, plus updates compaction has not yet removed and transaction markers (the state's
    bytes live in the instances' RocksDB, out of the page's reach)."""


def gather(pipeline: Pipeline, bootstrap: str, kafka: dict | None = None) -> Facts:
    """Ask the cluster: `logwheel status`'s rows, the groups' members, the dead-letter topics
    and the changelogs' extents."""
    now = now_ms()
    facts = Facts(now, status(pipeline, bootstrap, kafka, now=now))
    admin = AdminClient(client_config(bootstrap, kafka))
    existing = admin.list_topics(timeout=30).topics
    facts.dead_letters = dead_letters_by_stage(pipeline, bootstrap, kafka)
    consumer = Consumer(consumer_config(bootstrap, reader=reader_group(pipeline.name), extra=kafka))
    try:
        for part in pipeline.parts():
            if part.group is None or not part.partitions:  # keeps no keyed state
                continue
            facts.standbys[part.name] = standbys(part, group_members(admin, part.group))
            changelog = own_topic(part, "changelog")
            if changelog in existing:
                facts.state_offsets[part.name] = {
                    p: _extent(consumer, changelog, p)
                    for p in sorted(existing[changelog].partitions)
                }
    finally:
        consumer.close()
    return facts


def _extent(consumer: Consumer, topic: str, partition: int) -> int:
    low, high = watermark_offsets(consumer, TopicPartition(topic, partition))
    return max(0, high - low)


def assemble(
    pipeline: Pipeline,
    ref: str,
    facts: Facts,
    previous: Facts | None = None,
    replay_options: str = "",
) -> dict:
    """The JSON of `/api/pipeline`. `previous`: the facts of the last refresh, for rates;
    `ref`: MODULE:ATTR as the user gave it, for the replay commands (with `replay_options`,
    e.g. the bootstrap servers the page was started with)."""
    graph = topology(pipeline)
    boxes, width, height = layout(graph)
    before = {(r.computation, r.topic, r.partition): r for r in previous.rows} if previous else {}
    elapsed = (facts.now - previous.now) if previous else 0
    computations = []
    for part in pipeline.parts():
        if part.group is None:  # runs outside `logwheel run`: no rows, no card
            continue
        rows = [r for r in facts.rows if r.computation == part.name]
        partitions = [
            _partition(pipeline, r, before.get((r.computation, r.topic, r.partition)), elapsed)
            for r in rows
        ]
        _flag_held_back(partitions)
        computations.append(_summary(part, ref, facts, partitions, replay_options))
    return {
        "pipeline": pipeline.name,
        "ref": ref,
        "now": facts.now,
        "refresh_ms": REFRESH_MS,
        "held_back_ms": HELD_BACK_MS,
        "graph": {
            "width": width,
            "height": height,
            "nodes": [
                {**dataclasses.asdict(node), **dataclasses.asdict(boxes[node.id])}
                for node in graph.nodes.values()
            ],
            "edges": [dataclasses.asdict(e) for e in graph.edges],
        },
        "computations": computations,
    }


def _partition(pipeline: Pipeline, row: Status, before: Status | None, elapsed_ms: int) -> dict:
    """One row of `logwheel status` as the page shows it: its fields as they are, with the
    committed offsets per second since the last refresh and the holding producer placed."""
    out = dataclasses.asdict(row)
    rate = None
    if before is not None and elapsed_ms > 0 and None not in (row.offset, before.offset):
        rate = round(max(0, row.offset - before.offset) * 1000 / elapsed_ms, 1)
    out["records_per_second"] = rate
    held = row.held_back_by
    out["held_back_by_place"] = describe_producer(pipeline, held) if held else None
    out["holding_back"] = False
    return out


def _flag_held_back(partitions: list[dict]) -> None:
    """Flag the partitions of a topic whose watermark is `HELD_BACK_MS` behind the most
    advanced one of the same topic, or unknown while another's is known."""
    by_topic: dict[str, list[dict]] = {}
    for p in partitions:
        by_topic.setdefault(p["topic"], []).append(p)
    for same in by_topic.values():
        known = [p["low_watermark"] for p in same if p["low_watermark"] is not None]
        if len(same) < 2 or not known:
            continue
        ahead = max(known)
        for p in same:
            low = p["low_watermark"]
            p["holding_back"] = low is None or ahead - low >= HELD_BACK_MS


def _summary(part: Part, ref: str, facts: Facts, partitions: list[dict], options: str) -> dict:
    """A part's figures over its keyed partitions, its tasks, its dead letters, and its
    rows."""
    keyed = [p for p in partitions if p["topic"] in part.keyed_topics]
    lows = [p["low_watermark"] for p in keyed]
    low = None if not lows or None in lows else min(lows)
    rates = [p["records_per_second"] for p in partitions if p["records_per_second"] is not None]
    commits = [p["last_commit"] for p in partitions if p["last_commit"] is not None]
    lags = [p["consumer_lag"] for p in partitions if p["consumer_lag"] is not None]
    owners = {p["partition"]: p["owner"] for p in keyed if p["owner"]}
    held = facts.standbys.get(part.name, {})
    records = facts.state_offsets.get(part.name, {})
    stages = facts.dead_letters.get(part.name, {})
    return {
        "name": part.name,
        "kind": part.kind,
        "node": part.node,
        "group": part.group,
        "low_watermark": low,
        "lag_ms": None if low is None else facts.now - low,
        "consumer_lag": sum(lags) if lags else None,
        "records_per_second": round(sum(rates), 1) if rates else None,
        "last_commit": max(commits) if commits else None,
        "holding_back": any(p["holding_back"] for p in partitions),
        "tasks": [
            {
                "partition": p,
                "owner": owners.get(p),
                "standbys": held.get(p, []),
                "state_offsets": records.get(p),
            }
            for p in range(part.partitions)
        ],
        "dead_letters": {
            "topic": part.dlq,
            "total": sum(stages.values()),
            "by_stage": [
                {
                    "stage": stage,
                    "count": n,
                    # a sink's refused rows are listed, not replayed (`dlq replay` refuses them)
                    "replay": replay_command(ref, part.name, stage, options)
                    if part.replayable
                    else None,
                }
                for stage, n in stages.items()
            ],
        },
        "partitions": partitions,
    }


def replay_command(ref: str, computation: str, stage: str, options: str = "") -> str:
    """The `logwheel dlq replay` line that sends a stage's dead letters back."""
    words = ["logwheel", "dlq", "replay", ref, "--computation", computation, "--stage", stage]
    line = shlex.join(words)
    return f"{line} {options}".rstrip()


def status_rows(api: Mapping) -> list[dict]:
    """The `logwheel status` rows inside an `/api/pipeline` answer (its partitions, without
    what the page adds)."""
    fields = [f.name for f in dataclasses.fields(Status)]
    return [
        {name: p[name] for name in fields} for c in api["computations"] for p in c["partitions"]
    ]
