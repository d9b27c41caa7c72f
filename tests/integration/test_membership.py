"""A group never settles with partitions owned by no member: a static member killed in the
middle of a rebalance, and replaced at once under its instance id, leaves every partition
owned (seen in the seeded chaos run: with cooperative-sticky assignment, the killed member
never sent the second round of an incremental rebalance, and its replacement was handed the
first round's assignment, without the partitions it had been giving up)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from tests.support import REPO, wait_for

pytestmark = pytest.mark.timeout(180)


def member(kafka: str, topic: str, group: str, instance: str, *flags: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.integration.group_member", kafka, topic, group, instance]
    return subprocess.Popen([*args, *flags], cwd=REPO, stdout=subprocess.PIPE, text=True)


def owned(kafka: str, group: str) -> dict[str, list[int]] | None:
    """Each member's partitions, once the group is stable (None while it rebalances)."""
    admin = AdminClient({"bootstrap.servers": kafka})  # kept alive until the answer
    group_state = admin.describe_consumer_groups([group])[group].result(30)
    if group_state.state.name != "STABLE":
        return None
    return {
        m.group_instance_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
        for m in group_state.members
    }


def test_a_member_killed_mid_rebalance_leaves_no_partition_unowned(kafka, create_topic, unique):
    topic, group = create_topic(partitions=4), unique("group")
    first = member(kafka, topic, group, "a", "--die-on-revoke")
    others = []
    try:
        wait_for(lambda: owned(kafka, group) == {"a": [0, 1, 2, 3]}, 60, what="a owns all")
        others.append(member(kafka, topic, group, "b"))  # a is asked to give partitions up
        assert first.wait(60) == -9  # ... and dies before it can rejoin
        others.append(member(kafka, topic, group, "a"))  # replaced within its session

        def settled() -> bool:
            """Stable with a and b each owning partitions, every partition owned: the bug
            settled stable with the given-up partitions owned by no one."""
            members = owned(kafka, group)
            return (
                members is not None
                and set(members) == {"a", "b"}
                and all(members.values())
                and sorted(sum(members.values(), [])) == [0, 1, 2, 3]
            )

        # past the session timeout (10 s) with room for a loaded machine's rejoins
        wait_for(settled, 60, what=f"every partition owned by a and b ({owned(kafka, group)})")
    finally:
        for proc in [first, *others]:
            proc.kill()
            proc.wait()
