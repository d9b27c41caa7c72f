"""Who runs a computation: its consumer group's live members, the partitions each owns, and
the standby replicas each keeps (which a member's `client.id` announces,
framework/kafka/groups.py)."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from framework.core.part import Part
from framework.kafka.groups import standby_count, standby_partitions


@dataclass(frozen=True)
class Member:
    instance: str  # its static instance id, else its client id
    client_id: str
    partitions: tuple[tuple[str, int], ...]  # (topic, partition) it is assigned


def group_members(admin: AdminClient, group: str) -> list[Member]:
    """The live members of `group` and their assignments."""
    described = admin.describe_consumer_groups([group])[group].result(30)
    return [
        Member(
            member.group_instance_id or member.client_id,
            member.client_id,
            tuple((tp.topic, tp.partition) for tp in member.assignment.topic_partitions),
        )
        for member in described.members
    ]


def owners(members: list[Member]) -> dict[tuple[str, int], str]:
    """(topic, partition) -> the instance that owns it."""
    return {tp: m.instance for m in members for tp in m.partitions}


def standbys(spec: Part, members: list[Member]) -> dict[int, list[str]]:
    """Keyed partition -> the instances keeping a warm replica of its state, by the rule each
    member's task manager follows (`standby_partitions`)."""
    keyed = set(spec.keyed_topics)
    held: dict[int, list[str]] = {}
    for m in members:
        n = standby_count(m.client_id)
        if not n:
            continue
        owned = {p for t, p in m.partitions if t in keyed}
        for p in sorted(standby_partitions(owned, n, spec.partitions)):
            held.setdefault(p, []).append(m.instance)
    return held
