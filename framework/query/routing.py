"""Finding the instance that owns a key, and those that keep standby replicas of it, through
the computation's consumer group (README, "Querying state").

1. The key's partition is murmur2(key) mod the computation's partition count
   (framework/query/placement.py), as Kafka places it.
2. The group's description (AdminClient `describe_consumer_groups`) names each live member by
   its static `group.instance.id` (`<group>.<instance>`) and its assignment: the member
   assigned partition p of the computation's keyed topic owns task p, whose store holds the
   key.
3. The directory topic `<group>.serving` (framework/query/directory.py) says where that
   instance answers, and how many standbys each instance keeps, from which the holders of
   p's standby replicas follow (the partitions after each owned one).

Both are cached for `ttl_s`; a caller that met a wrong or dead instance calls `forget`, and the
next question asks the cluster again. Stale routes cost time, never a wrong answer: an instance
forgets a partition's replica when it gives the partition up, so one asked for a key it no
longer owns answers 503 and its asker looks again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from framework.errors import Retry
from framework.kafka.config import client_config
from framework.kafka.errors import reaching_kafka
from framework.kafka.groups import standby_partitions
from framework.query.directory import Address, read_directory
from framework.query.placement import partition_of

TTL_S = 10.0
DESCRIBE_TIMEOUT_S = 5.0


class NotServed(Retry):
    """No instance of the computation serves queries (none runs with `--serve`, or its group
    does not exist): the message says what to start."""


@dataclass(frozen=True)
class Replica:
    """An instance that holds a partition: where it answers, and whether as its owner."""

    instance: str
    url: str
    active: bool


@dataclass(frozen=True)
class Placement:
    """Where a key lives: its partition, and the instances holding it, its owner first (none
    while the group rebalances, or the owner is not in the directory)."""

    partition: int
    replicas: tuple[Replica, ...]


@dataclass
class _Routes:
    at: float
    directory: dict[str, Address]
    owned: dict[str, frozenset[int]]  # instance -> partitions it owns


class Router:
    """Places keys of one pipeline's computations on their instances; safe across threads."""

    def __init__(
        self, pipeline: str, bootstrap: str, kafka: dict | None = None, ttl_s: float = TTL_S
    ) -> None:
        self.pipeline = pipeline
        self.bootstrap = bootstrap
        self.kafka = dict(kafka or {})
        self.ttl_s = ttl_s
        self._admin: AdminClient | None = None  # made at the first question
        self._lock = threading.Lock()
        self._routes: dict[str, _Routes] = {}

    def group(self, computation: str) -> str:
        return f"{self.pipeline}.{computation}"

    def place(self, computation: str, key: str) -> Placement:
        """The key's partition and the instances that hold it; `NotServed` if no instance of
        the computation has ever served queries."""
        routes = self._current(computation)
        if not routes.directory:
            raise NotServed(
                f"no instance of {self.group(computation)} serves queries: run it with "
                "`logwheel run ... --serve [HOST:]PORT`"
            )
        partitions = next(iter(routes.directory.values())).partitions
        p = partition_of(key, partitions)
        owners, standbys = [], []
        for instance, owned in routes.owned.items():
            address = routes.directory.get(instance)
            if address is None:
                if p in owned:  # a member that joined before it published? asked again then
                    raise NotServed(
                        f"instance {instance} owns partition {p} of {self.group(computation)} "
                        "but does not serve queries: run every instance with --serve"
                    )
                continue
            if p in owned:
                owners.append(Replica(instance, address.url, True))
            elif p in standby_partitions(owned, address.standby, partitions):
                standbys.append(Replica(instance, address.url, False))
        return Placement(p, tuple(owners + standbys))

    def forget(self, computation: str) -> None:
        """Ask the cluster again at the next question (an answer said the routes moved)."""
        with self._lock:
            self._routes.pop(computation, None)

    def _current(self, computation: str) -> _Routes:
        with self._lock:
            routes = self._routes.get(computation)
        if routes is not None and time.monotonic() - routes.at < self.ttl_s:
            return routes
        group = self.group(computation)
        assigned = self._assignments(group)
        known = routes.directory if routes else {}
        if not known or set(assigned) - set(known):  # a new instance, perhaps at a new address
            known = read_directory(self.bootstrap, self.kafka, group)
        topics = {a.keyed_topic for a in known.values()}
        owned = {
            instance: frozenset(p for topic, p in tps if topic in topics)
            for instance, tps in assigned.items()
        }
        fresh = _Routes(time.monotonic(), known, owned)
        with self._lock:
            self._routes[computation] = fresh
        return fresh

    def _assignments(self, group: str) -> dict[str, list[tuple[str, int]]]:
        """Live members by instance id, with the partitions each is assigned."""
        if self._admin is None:
            self._admin = AdminClient(client_config(self.bootstrap, self.kafka))
        with reaching_kafka():
            futures = self._admin.describe_consumer_groups(
                [group], request_timeout=DESCRIBE_TIMEOUT_S
            )
            description = futures[group].result(DESCRIBE_TIMEOUT_S + 5)
        prefix = f"{group}."
        return {
            (member.group_instance_id or member.member_id).removeprefix(prefix): [
                (tp.topic, tp.partition)
                for tp in (member.assignment.topic_partitions if member.assignment else [])
            ]
            for member in description.members
        }
